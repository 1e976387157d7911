// Runs the kernels of src/nn/cuda/kernels.cu on the CPU, each block's
// threads as real threads meeting at __syncthreads (std::barrier), blocks one
// after another (so a function-static array serves as the block's shared
// memory), and checks them against batch norm (and the residual end)
// computed plainly in double, and the gradients against finite differences
// of that plain version.
// tests/cuda_emulated.rs builds and runs it: the kernels' arithmetic and
// indexing are checked on machines without a GPU.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* block_barrier = nullptr;
#define __global__
#define __shared__ static
#define __syncthreads() block_barrier->arrive_and_wait()
#define __device__
// CUDA's correctly rounded f32 operations are the CPU's plain ones (x86-64
// SSE, and ISO C++ fuses no multiply-add).
static float __fadd_rn(float a, float b) { return a + b; }
static float __fsub_rn(float a, float b) { return a - b; }
static float __fmul_rn(float a, float b) { return a * b; }
static float __fdiv_rn(float a, float b) { return a / b; }
static float __fsqrt_rn(float a) { return std::sqrt(a); }
static float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
static float __uint_as_float(unsigned u) { return __int_as_float((int)u); }
// Blocks run one after another here, so the last-block ticket needs no
// more than an add, and the fence orders nothing that could overlap.
static void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static unsigned atomicAdd(unsigned* a, unsigned v) {
    const unsigned old = *a;
    *a = old + v;
    return old;
}
// A load past the L1 cache: a plain one here.
template <typename T>
static T __ldcg(const T* p) {
    return *p;
}
static unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// Batch norm's kernels keep per-channel values of up to this many channels
// in shared memory: the checks below have 2 (kept) and 3 or 4 (not).
#define CACHED_CHANNELS 2
#include "../../src/nn/cuda/kernels.cu"

// The partial-sums kernels' Finish for two launches (channel_finish after).
static const Finish NO_FINISH = {nullptr, nullptr, nullptr, nullptr, 0, 0, 0.f, 0.f, 0.f, 0};

// The kernels' `divide` argument: every check runs with 0 (values walked
// to, the default) and 1 (placed by division, GO_TRAIN_CHANNEL_WALK=0).
static int divide = 0;

// A launch: grid.x blocks of block.x threads.
// One thread per thread of a block, for the whole launch: each runs its
// part of every block in turn, all meeting at the barrier before the next
// block (whose shared memory is the same statics). Starting threads a block
// instead took most of this test's time.
static void launch(unsigned grid, unsigned block, const std::function<void()>& kernel) {
    gridDim.x = grid;
    blockDim.x = block;
    std::barrier<> bar(block);
    block_barrier = &bar;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; t++) {
        threads.emplace_back([&, t] {
            threadIdx.x = t;
            for (unsigned b = 0; b < grid; b++) {
                blockIdx.x = b;
                kernel();
                bar.arrive_and_wait();
            }
        });
    }
    for (auto& th : threads) th.join();
}

static const float EPS = 1e-5f;
static int failures = 0;

static void expect_same(const char* what, const std::vector<float>& got, const std::vector<float>& want);

// channel_sums as src/nn/cuda/mod.rs launches it: `splits` blocks a
// channel, then one thread a channel adding up their sums.
// With `avg` (the running mean, then the running variance: 2c values), the
// moments are folded into it as batch norm's running averages. Run again
// with the last block finishing (one launch), the same out and averages to
// the bit, and the ticket counter back at 0.
static void channel_sums(const float* x, const float* dy, const float* y, const float* stats, float eps, float* out,
                         int n, int c, int p, int what, int relu, int splits, float* avg = nullptr) {
    std::vector<float> avg_before(avg ? avg : out, avg ? avg + 2 * c : out);
    std::vector<double> partial(2 * c * splits);
    launch(c * splits, THREADS, [&] {
        channel_partial_sums(x, dy, y, stats, eps, partial.data(), n, c, p, what, relu, splits, divide, NO_FINISH);
    });
    float* avg_var = avg ? avg + c : nullptr;
    launch((c + 63) / 64, 64, [&] {
        channel_finish(partial.data(), out, n, c, p, what, splits, avg, avg_var, 0.9f, 0.1f, 0.1f * 1.25f, avg != nullptr);
    });
    std::vector<float> out1(2 * c);
    std::vector<double> partial1(2 * c * splits, -1.0);
    unsigned done = 0;
    const Finish fin = {out1.data(), avg_before.data(), avg_before.data() + c, &done, n, p, 0.9f, 0.1f, 0.1f * 1.25f,
                        avg != nullptr};
    launch(c * splits, THREADS, [&] {
        channel_partial_sums(x, dy, y, stats, eps, partial1.data(), n, c, p, what, relu, splits, divide, fin);
    });
    expect_same("sums finished by the last block", out1, std::vector<float>(out, out + 2 * c));
    if (avg) expect_same("running averages by the last block", avg_before, std::vector<float>(avg, avg + 2 * c));
    if (done != 0) {
        std::printf("MISMATCH last-block ticket left at %u\n", done);
        failures++;
    }
}

static void expect_close(const char* what, double got, double want, double tol) {
    if (!(std::fabs(got - want) <= tol * (1.0 + std::fabs(want)))) {
        if (failures < 20) std::printf("MISMATCH %s: got %.8g, want %.8g\n", what, got, want);
        failures++;
    }
}

// Plain batch norm in double: y and the loss sum(y * w).
struct Plain {
    int n, c, p;
    bool relu, batch_stats;
    std::vector<double> run_mean, run_var;  // used when !batch_stats

    std::vector<double> forward(const std::vector<double>& x, const std::vector<double>& gamma,
                                const std::vector<double>& beta, std::vector<double>* mean_out = nullptr,
                                std::vector<double>* var_out = nullptr) const {
        std::vector<double> y(x.size()), mean(c), var(c);
        for (int ch = 0; ch < c; ch++) {
            if (batch_stats) {
                double s = 0, q = 0;
                for (int b = 0; b < n; b++)
                    for (int j = 0; j < p; j++) s += x[(b * c + ch) * p + j];
                double mu = s / (n * p);
                for (int b = 0; b < n; b++)
                    for (int j = 0; j < p; j++) {
                        double d = x[(b * c + ch) * p + j] - mu;
                        q += d * d;
                    }
                mean[ch] = mu;
                var[ch] = q / (n * p);
            } else {
                mean[ch] = run_mean[ch];
                var[ch] = run_var[ch];
            }
            for (int b = 0; b < n; b++)
                for (int j = 0; j < p; j++) {
                    int i = (b * c + ch) * p + j;
                    double v = (x[i] - mean[ch]) / std::sqrt(var[ch] + EPS) * gamma[ch] + beta[ch];
                    y[i] = relu && v < 0 ? 0 : v;
                }
        }
        if (mean_out) *mean_out = mean;
        if (var_out) *var_out = var;
        return y;
    }

    double loss(const std::vector<double>& x, const std::vector<double>& gamma, const std::vector<double>& beta,
                const std::vector<double>& w) const {
        auto y = forward(x, gamma, beta);
        double l = 0;
        for (size_t i = 0; i < y.size(); i++) l += y[i] * w[i];
        return l;
    }
};

static std::vector<float> to_f(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

static void check(int n, int c, int p, bool relu, bool batch_stats, int splits, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    int total = n * c * p;
    std::vector<double> x(total), w(total), gamma(c), beta(c), rmean(c), rvar(c);
    for (auto& v : x) v = 2.0 * u(rng) + 0.5;
    for (auto& v : w) v = u(rng);
    for (int ch = 0; ch < c; ch++) {
        gamma[ch] = 1.25 + 0.75 * u(rng);
        beta[ch] = 0.5 * u(rng);
        rmean[ch] = 0.3 * u(rng);
        rvar[ch] = 1.0 + 0.5 * u(rng);
    }
    Plain plain{n, c, p, relu, batch_stats, rmean, rvar};
    std::vector<double> mean, var;
    auto y_ref = plain.forward(x, gamma, beta, &mean, &var);

    auto xf = to_f(x), gf = to_f(gamma), bf = to_f(beta);
    std::vector<float> stats(2 * c);
    if (batch_stats) {
        channel_sums(xf.data(), xf.data(), xf.data(), xf.data(), 0.f, stats.data(), n, c, p, MOMENTS, 0, splits);
        for (int ch = 0; ch < c; ch++) {
            expect_close("mean", stats[ch], mean[ch], 1e-5);
            expect_close("variance", stats[c + ch], var[ch], 1e-5);
        }
    } else {
        for (int ch = 0; ch < c; ch++) {
            stats[ch] = (float)rmean[ch];
            stats[c + ch] = (float)rvar[ch];
        }
    }
    std::vector<float> y(total);
    launch(7, 64, [&] { normalize(xf.data(), stats.data(), gf.data(), bf.data(), EPS, y.data(), c, p, total, relu, divide); });
    for (int i = 0; i < total; i++) expect_close("output", y[i], y_ref[i], 1e-4);

    // Gradients of sum(y * w): dy = w.
    auto dyf = to_f(w);
    std::vector<float> sums(2 * c), dx(total);
    channel_sums(xf.data(), dyf.data(), y.data(), stats.data(), EPS, sums.data(), n, c, p, GRADIENT, relu, splits);
    launch(5, 128, [&] {
        normalize_grad(xf.data(), dyf.data(), y.data(), stats.data(), gf.data(), sums.data(), EPS, dx.data(), c, p,
                       total, (float)(n * p), relu, batch_stats, divide);
    });
    // dβ, dγ and dx against central differences of the plain loss.
    const double h = 1e-4;
    auto numeric = [&](std::vector<double>& v, int i) {
        double keep = v[i];
        v[i] = keep + h;
        double up = plain.loss(x, gamma, beta, w);
        v[i] = keep - h;
        double down = plain.loss(x, gamma, beta, w);
        v[i] = keep;
        return (up - down) / (2 * h);
    };
    for (int ch = 0; ch < c; ch++) {
        expect_close("beta gradient", sums[ch], numeric(beta, ch), 1e-4);
        expect_close("gamma gradient", sums[c + ch], numeric(gamma, ch), 1e-4);
    }
    for (int i = 0; i < total; i += 7) {
        // A ReLU's kink makes a central difference meaningless right at it.
        if (relu && std::fabs(y_ref[i]) < 1e-3) continue;
        expect_close("input gradient", dx[i], numeric(x, i), 1e-4);
    }
}

// The residual end: relu(x + skip) and its gradient, exactly as plain
// float arithmetic gives them (one add, one comparison).
static void check_residual(int total, int packed, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> x(total), skip(total), dy(total), y(total), g(total);
    for (int i = 0; i < total; i++) {
        x[i] = u(rng);
        skip[i] = u(rng);
        dy[i] = u(rng);
    }
    launch(3, 64, [&] { residual_relu(x.data(), skip.data(), y.data(), total, packed); });
    launch(2, 128, [&] { relu_grad(y.data(), dy.data(), g.data(), total, packed); });
    int positive = 0;
    for (int i = 0; i < total; i++) {
        float want = std::max(x[i] + skip[i], 0.f);
        expect_close("residual output", y[i], want, 0.0);
        expect_close("residual gradient", g[i], want > 0.f ? dy[i] : 0.f, 0.0);
        positive += want > 0.f;
    }
    if (positive == 0 || positive == total) {
        std::printf("MISMATCH residual: only one side of the ReLU tested\n");
        failures++;
    }
    // Packs allowed but the buffers one value off 16 bytes: the kernel
    // must see it and go a value at a time, to the same result.
    std::vector<float> xs(total + 1), ss(total + 1), ys(total + 1);
    std::copy(x.begin(), x.end(), xs.begin() + 1);
    std::copy(skip.begin(), skip.end(), ss.begin() + 1);
    launch(3, 64, [&] { residual_relu(xs.data() + 1, ss.data() + 1, ys.data() + 1, total, 1); });
    expect_same("residual_relu on unaligned buffers", std::vector<float>(ys.begin() + 1, ys.end()), y);
}

// A convolution's bias: y = x + b per channel (then the ReLU when `relu`),
// and the bias gradient as channel_sums' plain sums of dy.
static void check_bias(int n, int c, int p, int splits, bool relu, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    int total = n * c * p;
    std::vector<float> x(total), dy(total), y(total), b(c), sums(2 * c);
    for (auto& v : x) v = u(rng);
    for (auto& v : dy) v = u(rng);
    for (auto& v : b) v = u(rng);
    launch(3, 64, [&] { channel_bias(x.data(), b.data(), y.data(), c, p, total, relu, divide); });
    channel_sums(dy.data(), dy.data(), dy.data(), dy.data(), 0.f, sums.data(), n, c, p, SUMS, 0, splits);
    for (int ch = 0; ch < c; ch++) {
        double s = 0, q = 0;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < p; j++) {
                int i = (k * c + ch) * p + j;
                const float v = x[i] + b[ch];
                expect_close("bias output", y[i], relu ? std::max(v, 0.f) : v, 0.0);
                s += dy[i];
                q += (double)dy[i] * dy[i];
            }
        expect_close("bias gradient", sums[ch], s, 1e-6);
        expect_close("sum of squares", sums[c + ch], q, 1e-6);
    }
}

// The optimizers' updates (and batch norm's running average, the same
// kind of update) against the CPU's f32 arithmetic (src/train/optim_kernels.rs,
// src/nn/layers.rs) written out again, compared bit for bit: n values on a
// grid of 3 blocks of 32 threads (a grid-stride loop of several turns),
// with zeros of both signs among them, every switch both ways.
static void expect_same(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
    if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) {
        for (size_t i = 0; i < got.size(); i++) {
            if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                if (failures < 20) std::printf("MISMATCH %s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
                failures++;
                return;
            }
        }
    }
}

static float plain_scaled(float x, float s) { return x * s + 0.f; }
static float plain_penalised(float g, float w, float wd, bool has_wd) { return has_wd ? g + plain_scaled(w, wd) : g; }

// A table row of the optimizers' kernels (TABLE_COLUMNS words).
static void table_row(std::vector<unsigned long long>& table, float* w, const float* g, float* s1, float* s2, long start,
                      unsigned a, unsigned b) {
    for (unsigned long long x : {(unsigned long long)w, (unsigned long long)g, (unsigned long long)s1,
                                 (unsigned long long)s2, (unsigned long long)start, (unsigned long long)a,
                                 (unsigned long long)b, 0ull})
        table.push_back(x);
}

static unsigned float_bits(float x) {
    unsigned u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

// The optimizers' kernels over three tensors of n, 7 and 1 values (the
// table's bisection; values 0 and 1 of the first are zeros of both
// signs), each tensor with numbers of its own (first step or not; Adam's
// step size and bias correction), against the CPU's f32 arithmetic.
static int check_optimizers(long n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    auto values = [&](bool positive) {
        std::vector<float> v(n + 8);
        for (auto& x : v) x = positive ? std::fabs(u(rng)) : u(rng);
        v[0] = 0.f;
        if (!positive) v[1] = -0.f;
        return v;
    };
    const std::vector<float> g = values(false), w0 = values(false), m0 = values(false), v0 = values(true);
    const long sizes[3] = {n, 7, 1}, starts[3] = {0, n, n + 7}, total = n + 8;
    int cases = 0;
    for (int has_wd : {0, 1}) {
        const float wd = 1e-3f;
        for (int has_momentum : {0, 1}) {
            std::vector<float> w = w0, v = m0, want_w = w0, want_v = m0;
            std::vector<unsigned long long> table;
            for (int k = 0; k < 3; k++)
                table_row(table, &w[starts[k]], &g[starts[k]], &v[starts[k]], nullptr, starts[k], k == 1, 0);
            launch(3, 32, [&] { sgd_tensors(table.data(), 3, total, 0.9f, has_momentum, wd, has_wd, 0.05f); });
            for (int k = 0; k < 3; k++)
                for (long i = starts[k]; i < starts[k] + sizes[k]; i++) {
                    const float gi = plain_penalised(g[i], w0[i], wd, has_wd);
                    if (has_momentum) {
                        want_v[i] = k == 1 ? gi : plain_scaled(m0[i], 0.9f) + gi;
                        want_w[i] = w0[i] - plain_scaled(want_v[i], 0.05f);
                    } else {
                        want_w[i] = w0[i] - plain_scaled(gi, 0.05f);
                    }
                }
            expect_same("sgd_tensors w", w, want_w);
            expect_same("sgd_tensors v", v, want_v);
            cases++;
        }
        std::vector<float> w = w0, m = m0, v = v0, want_w = w0, want_m = m0, want_v = v0;
        const float step[3] = {0.01f, 0.02f, 0.003f}, inv_bc2[3] = {1.2f, 3.5f, 1.01f};
        std::vector<unsigned long long> table;
        for (int k = 0; k < 3; k++)
            table_row(table, &w[starts[k]], &g[starts[k]], &m[starts[k]], &v[starts[k]], starts[k], float_bits(step[k]),
                      float_bits(inv_bc2[k]));
        launch(3, 32, [&] { adam_tensors(table.data(), 3, total, 0.9f, 0.1f, 0.999f, 0.001f, wd, has_wd, 1e-8f); });
        for (int k = 0; k < 3; k++)
            for (long i = starts[k]; i < starts[k] + sizes[k]; i++) {
                const float gi = plain_penalised(g[i], w0[i], wd, has_wd);
                want_m[i] = plain_scaled(m0[i], 0.9f) + plain_scaled(gi, 0.1f);
                want_v[i] = plain_scaled(v0[i], 0.999f) + plain_scaled(gi * gi, 0.001f);
                const float denom = plain_scaled(std::sqrt(want_v[i]), inv_bc2[k]) * 1.f + 1e-8f;
                want_w[i] = w0[i] - plain_scaled(want_m[i] / denom, step[k]);
            }
        expect_same("adam_tensors w", w, want_w);
        expect_same("adam_tensors m", m, want_m);
        expect_same("adam_tensors v", v, want_v);
        cases++;
    }
    // Batch norm's running averages, folded in by channel_finish: 3
    // channels of 4 planes of 9 points.
    const int c = 3, planes = 4 * 9;
    std::vector<float> x(c * planes), stats(2 * c), avg(2 * c);
    for (auto& v : x) v = u(rng);
    for (int i = 0; i < 2 * c; i++) avg[i] = i < c ? u(rng) : std::fabs(u(rng));
    std::vector<float> want(avg);
    channel_sums(x.data(), x.data(), x.data(), x.data(), 0.f, stats.data(), 4, c, 9, MOMENTS, 0, 2, avg.data());
    for (int i = 0; i < 2 * c; i++) want[i] = plain_scaled(want[i], 0.9f) + plain_scaled(stats[i], i < c ? 0.1f : 0.1f * 1.25f);
    expect_same("channel_finish's running averages", avg, want);
    return cases + 1;
}

// The losses' kernels against the same losses in double: the masked
// log-softmax of `batch` rows of 362 logits (occupied points masked, as
// src/nn/loss.rs does), its gradient, the NLL of the targets (a target
// outside the moves gives NaN) with its gradient, and the MSE with its.
static int check_losses(int batch, int n_planes, unsigned seed) {
    const int points = 361, moves = 362;
    const float M = -1e9f;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    std::vector<float> logits(batch * moves), planes(batch * n_planes * points), dy(batch * moves);
    for (auto& x : logits) x = u(rng);
    for (auto& x : dy) x = u(rng);
    for (auto& x : planes) x = (rng() % 3 != 0) ? 1.f : 0.f;  // the empty plane: a third occupied
    std::vector<float> logp(batch * moves), dx(batch * moves);
    launch(batch, THREADS, [&] {
        masked_log_softmax(logits.data(), planes.data(), logp.data(), n_planes, 0, points, moves, -M, M);
    });
    launch(batch, THREADS, [&] { log_softmax_grad(logp.data(), dy.data(), dx.data(), moves); });
    for (int b = 0; b < batch; b++) {
        std::vector<double> z(moves);
        double max = -1e300, sum = 0, total = 0;
        for (int j = 0; j < moves; j++) {
            const bool legal = j == points || planes[(long)b * n_planes * points + j] == 1.f;
            z[j] = legal ? logits[b * moves + j] : -1e9;
            max = std::max(max, z[j]);
            total += dy[b * moves + j];
        }
        for (int j = 0; j < moves; j++) sum += std::exp(z[j] - max);
        for (int j = 0; j < moves; j++) {
            const double want = z[j] - max - std::log(sum);
            if (z[j] > -1e8) expect_close("masked_log_softmax", logp[b * moves + j], want, 1e-5);
            else if (!(logp[b * moves + j] < -1e8)) expect_close("masked point", logp[b * moves + j], -1e9, 0);
            expect_close("log_softmax_grad", dx[b * moves + j], dy[b * moves + j] - std::exp(want) * total, 1e-5);
        }
    }
    std::vector<unsigned> target(batch);
    for (int b = 0; b < batch; b++) target[b] = (b * 97 + 5) % moves;
    float loss = 0, dloss = 0.7f;
    launch(1, THREADS, [&] { nll_forward(logp.data(), target.data(), &loss, batch, moves, -1.f / batch); });
    double want = 0;
    for (int b = 0; b < batch; b++) want -= logp[b * moves + target[b]];
    expect_close("nll_forward", loss, want / batch, 1e-6);
    std::vector<float> d(batch * moves);
    launch(3, 32, [&] { nll_grad(target.data(), &dloss, d.data(), moves, -1.f / batch, (long)batch * moves); });
    for (int i = 0; i < batch * moves; i++) {
        const bool hit = (int)target[i / moves] == i % moves;
        expect_close("nll_grad", d[i], hit ? -0.7 / batch : 0.0, 1e-7);
    }
    target[batch - 1] = moves;  // outside the moves
    launch(1, THREADS, [&] { nll_forward(logp.data(), target.data(), &loss, batch, moves, -1.f / batch); });
    if (!std::isnan(loss)) {
        std::printf("MISMATCH nll_forward: a target outside the moves gave %g, not NaN\n", loss);
        failures++;
    }
    const long n = (long)batch * 300 + 7;
    std::vector<float> p(n), t(n), dp(n);
    for (long i = 0; i < n; i++) p[i] = u(rng), t[i] = (float)(rng() % 2);
    float mse = 0;
    launch(1, THREADS, [&] { mse_forward(p.data(), t.data(), &mse, n, 1.f / n); });
    launch(3, 32, [&] { mse_grad(p.data(), t.data(), &dloss, dp.data(), 1.f / n, n); });
    double sq = 0;
    for (long i = 0; i < n; i++) {
        sq += ((double)p[i] - t[i]) * ((double)p[i] - t[i]);
        expect_close("mse_grad", dp[i], 2.0 * ((double)p[i] - t[i]) * 0.7 / n, 1e-6);
    }
    expect_close("mse_forward", mse, sq / n, 1e-5);
    return 6;
}

// unpack_bits against the bits read one by one: planes of 361 points (6
// words, the last partly used, its spare bits set to show they are
// ignored) and of 64 (one full word), on a grid-stride loop of several turns.
static int check_unpack_bits(int planes, int points, unsigned seed) {
    const int wpp = (points + 63) / 64;
    std::mt19937_64 rng(seed);
    std::vector<unsigned long long> words((size_t)planes * wpp);
    for (auto& w : words) w = rng();
    std::vector<float> got((size_t)planes * points, -1.f), want(got.size());
    for (int p = 0; p < planes; p++)
        for (int i = 0; i < points; i++) want[(size_t)p * points + i] = (float)((words[(size_t)p * wpp + i / 64] >> (i % 64)) & 1);
    launch(3, 32, [&] { unpack_bits(words.data(), got.data(), points, wpp, (long)planes, divide); });
    expect_same("unpack_bits", got, want);
    return 1;
}

// bf16 values as the kernels hold them, and back.
static std::vector<bf16_t> to_bf16s(const std::vector<float>& v) {
    std::vector<bf16_t> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = to_bf16(v[i]);
    return out;
}
static std::vector<float> from_bf16s(const std::vector<bf16_t>& v) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); i++) out[i] = load(v.data(), (long)i);
    return out;
}

// to_bf16 against values whose rounding is known: exact ones, ties to
// even either way, just past a tie, the largest finite values, NaN.
static int check_bf16_rounding() {
    const struct {
        unsigned f32, bf16;
    } cases[] = {
        {0x3f800000u, 0x3f80u},  // 1
        {0x3f808000u, 0x3f80u},  // 1 + 2^-8, a tie: down to the even 1
        {0x3f818000u, 0x3f82u},  // a tie above an odd bf16: up to even
        {0x3f808001u, 0x3f81u},  // just past the tie: up
        {0x3f807fffu, 0x3f80u},  // just short of it: down
        {0xbf808001u, 0xbf81u},  // the same negative
        {0x80000000u, 0x8000u},  // -0
        {0x7f7fffffu, 0x7f80u},  // the largest f32 rounds to infinity, as in candle
        {0x7f800000u, 0x7f80u},  // infinity
        {0x7fc00000u, 0x7fc0u},  // NaN
        {0x7f800001u, 0x7fc0u},  // a signalling NaN stays a NaN (not infinity)
    };
    for (auto c : cases) {
        bf16_t got = to_bf16(__uint_as_float(c.f32));
        if (got != c.bf16) {
            std::printf("MISMATCH to_bf16(%08x): got %04x, want %04x\n", c.f32, got, c.bf16);
            failures++;
        }
    }
    return 1;
}

// Each kernel's bf16 version against its f32 version run on the same
// values (bf16 inputs widened): the same f32 arithmetic, so the bf16
// outputs must be the f32 outputs rounded, bit for bit, and the f32
// statistics and sums the same.
static int check_bf16_kernels(int n, int c, int p, bool relu, bool batch_stats, int splits, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const int total = n * c * p;
    std::vector<float> x(total), dy(total), skip(total), gamma(c), beta(c), b(c);
    for (auto& v : x) v = 2.f * u(rng) + 0.5f;
    for (auto& v : dy) v = u(rng);
    for (auto& v : skip) v = u(rng);
    for (int ch = 0; ch < c; ch++) {
        gamma[ch] = 1.25f + 0.75f * u(rng);
        beta[ch] = 0.5f * u(rng);
        b[ch] = u(rng);
    }
    auto xb = to_bf16s(x), dyb = to_bf16s(dy), skipb = to_bf16s(skip);
    x = from_bf16s(xb), dy = from_bf16s(dyb), skip = from_bf16s(skipb);
    auto rounded = [](const std::vector<float>& v) { return from_bf16s(to_bf16s(v)); };
    auto sums_of = [&](auto* xs, auto* dys, auto* ys, const float* stats, int what, std::vector<float>& out) {
        std::vector<double> partial(2 * c * splits);
        launch(c * splits, THREADS, [&] {
            if constexpr (std::is_same_v<decltype(xs), bf16_t*>)
                channel_partial_sums_bf16(xs, dys, ys, stats, EPS, partial.data(), n, c, p, what, relu, splits, divide,
                                          NO_FINISH);
            else
                channel_partial_sums(xs, dys, ys, stats, EPS, partial.data(), n, c, p, what, relu, splits, divide,
                                     NO_FINISH);
        });
        launch(1, 64, [&] {
            channel_finish(partial.data(), out.data(), n, c, p, what, splits, nullptr, nullptr, 0.f, 0.f, 0.f, 0);
        });
    };
    std::vector<float> stats(2 * c), stats_b(2 * c);
    sums_of(x.data(), x.data(), x.data(), stats.data(), MOMENTS, stats);
    sums_of(xb.data(), xb.data(), xb.data(), stats.data(), MOMENTS, stats_b);
    expect_same("bf16 moments", stats_b, stats);
    std::vector<float> y(total);
    std::vector<bf16_t> yb(total);
    launch(7, 64, [&] { normalize(x.data(), stats.data(), gamma.data(), beta.data(), EPS, y.data(), c, p, total, relu, divide); });
    launch(7, 64, [&] { normalize_bf16(xb.data(), stats.data(), gamma.data(), beta.data(), EPS, yb.data(), c, p, total, relu, divide); });
    expect_same("bf16 normalize", from_bf16s(yb), rounded(y));
    // The backward from the bf16 output, as the bf16 net has it.
    y = from_bf16s(yb);
    std::vector<float> sums(2 * c), sums_b(2 * c), dx(total);
    sums_of(x.data(), dy.data(), y.data(), stats.data(), GRADIENT, sums);
    sums_of(xb.data(), dyb.data(), yb.data(), stats.data(), GRADIENT, sums_b);
    expect_same("bf16 gradient sums", sums_b, sums);
    std::vector<bf16_t> dxb(total);
    const float m = (float)(n * p);
    launch(5, 128, [&] {
        normalize_grad(x.data(), dy.data(), y.data(), stats.data(), gamma.data(), sums.data(), EPS, dx.data(), c, p,
                       total, m, relu, batch_stats, divide);
    });
    launch(5, 128, [&] {
        normalize_grad_bf16(xb.data(), dyb.data(), yb.data(), stats.data(), gamma.data(), sums.data(), EPS, dxb.data(),
                            c, p, total, m, relu, batch_stats, divide);
    });
    expect_same("bf16 normalize_grad", from_bf16s(dxb), rounded(dx));
    launch(3, 64, [&] { channel_bias(x.data(), b.data(), y.data(), c, p, total, relu, divide); });
    launch(3, 64, [&] { channel_bias_bf16(xb.data(), b.data(), yb.data(), c, p, total, relu, divide); });
    expect_same("bf16 channel_bias", from_bf16s(yb), rounded(y));
    // In 16-byte packs of 8 where the values fill them (200 do, 300 and
    // 1,444 do not).
    const int packs = total % 8 == 0 ? 1 : 0;
    launch(3, 64, [&] { residual_relu(x.data(), skip.data(), y.data(), total, 0); });
    launch(3, 64, [&] { residual_relu_bf16(xb.data(), skipb.data(), yb.data(), total, packs); });
    expect_same("bf16 residual_relu", from_bf16s(yb), rounded(y));
    launch(2, 128, [&] { relu_grad(y.data(), dy.data(), dx.data(), total, 0); });
    launch(2, 128, [&] { relu_grad_bf16(yb.data(), dyb.data(), dxb.data(), total, packs); });
    expect_same("bf16 relu_grad", from_bf16s(dxb), dx);
    return 1;
}

// The channels-last kernels against the NCHW ones on the same values
// transposed, in activations of type T: normalize and normalize_grad the
// same to the bit (given the same statistics and sums), the moments and
// gradient sums the same but for the order of their double sums. `packed`
// moves whole 16-byte packs (c a multiple of 4 in f32, 8 in bf16); c of 256
// or more unpacked gives a thread whole channels over all its block's rows.
template <typename T>
static int check_channels_last(int n, int c, int p, bool relu, bool batch_stats, bool packed, int blocks,
                               unsigned seed) {
    constexpr bool BF16 = std::is_same_v<T, bf16_t>;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const int total = n * c * p;
    const long rows = (long)n * p;
    std::vector<float> x(total), dy(total), gamma(c), beta(c);
    for (auto& v : x) v = 2.f * u(rng) + 0.5f;
    for (auto& v : dy) v = u(rng);
    for (int ch = 0; ch < c; ch++) {
        gamma[ch] = 1.25f + 0.75f * u(rng);
        beta[ch] = 0.5f * u(rng);
    }
    auto as_t = [](const std::vector<float>& v) {
        if constexpr (BF16) {
            return to_bf16s(v);
        } else {
            return v;
        }
    };
    auto as_f = [](const std::vector<T>& v) {
        if constexpr (BF16) {
            return from_bf16s(v);
        } else {
            return v;
        }
    };
    // NCHW index of (row, channel) and back.
    auto nchw = [&](long r, int ch) { return ((r / p) * c + ch) * p + r % p; };
    auto to_last = [&](const std::vector<T>& v) {
        std::vector<T> out(v.size());
        for (long r = 0; r < rows; r++)
            for (int ch = 0; ch < c; ch++) out[r * c + ch] = v[nchw(r, ch)];
        return out;
    };
    auto xt = as_t(x), dyt = as_t(dy);
    auto xl = to_last(xt), dyl = to_last(dyt);
    auto sums_first = [&](const T* xs, const T* dys, const T* ys, const float* stats, int what, float* out) {
        std::vector<double> partial(2 * c * 2);
        launch(c * 2, THREADS, [&] {
            if constexpr (BF16)
                channel_partial_sums_bf16(xs, dys, ys, stats, EPS, partial.data(), n, c, p, what, relu, 2, divide,
                                          NO_FINISH);
            else
                channel_partial_sums(xs, dys, ys, stats, EPS, partial.data(), n, c, p, what, relu, 2, divide, NO_FINISH);
        });
        launch((c + 63) / 64, 64, [&] {
            channel_finish(partial.data(), out, n, c, p, what, 2, nullptr, nullptr, 0.f, 0.f, 0.f, 0);
        });
    };
    // Two launches into `out`, then one (the last block finishing), the
    // same to the bit.
    auto sums_last = [&](const T* xs, const T* dys, const T* ys, const float* stats, int what, float* out) {
        std::vector<double> partial(2 * c * blocks);
        auto partials = [&](const Finish& fin) {
            launch(blocks, THREADS, [&] {
                if constexpr (BF16)
                    channel_partial_sums_nhwc_bf16(xs, dys, ys, stats, EPS, partial.data(), rows, c, what, relu, packed,
                                                   fin);
                else
                    channel_partial_sums_nhwc(xs, dys, ys, stats, EPS, partial.data(), rows, c, what, relu, packed, fin);
            });
        };
        partials(NO_FINISH);
        launch((c + 63) / 64, 64, [&] {
            channel_finish(partial.data(), out, (int)rows, c, 1, what, blocks, nullptr, nullptr, 0.f, 0.f, 0.f, 0);
        });
        std::vector<float> one(2 * c);
        unsigned done = 0;
        partials(Finish{one.data(), nullptr, nullptr, &done, (int)rows, 1, 0.f, 0.f, 0.f, 0});
        expect_same("channels-last sums finished by the last block", one, std::vector<float>(out, out + 2 * c));
    };
    auto close = [&](const char* what, const std::vector<float>& got, const std::vector<float>& want) {
        for (size_t i = 0; i < got.size(); i++) expect_close(what, got[i], want[i], 1e-6);
    };
    std::vector<float> stats(2 * c), stats_l(2 * c);
    sums_first(xt.data(), xt.data(), xt.data(), nullptr, MOMENTS, stats.data());
    sums_last(xl.data(), xl.data(), xl.data(), nullptr, MOMENTS, stats_l.data());
    close("channels-last moments", stats_l, stats);
    if (!batch_stats)
        for (int ch = 0; ch < c; ch++) stats[c + ch] += 0.25f;  // running averages, not the batch's
    std::vector<T> y(total), yl(total);
    launch(7, 64, [&] {
        if constexpr (BF16)
            normalize_bf16(xt.data(), stats.data(), gamma.data(), beta.data(), EPS, y.data(), c, p, total, relu, divide);
        else
            normalize(xt.data(), stats.data(), gamma.data(), beta.data(), EPS, y.data(), c, p, total, relu, divide);
    });
    launch(3, 32, [&] {
        if constexpr (BF16)
            normalize_nhwc_bf16(xl.data(), stats.data(), gamma.data(), beta.data(), EPS, yl.data(), c, total, relu, packed);
        else
            normalize_nhwc(xl.data(), stats.data(), gamma.data(), beta.data(), EPS, yl.data(), c, total, relu, packed);
    });
    expect_same("channels-last normalize", as_f(yl), as_f(to_last(y)));
    std::vector<float> sums(2 * c), sums_l(2 * c);
    sums_first(xt.data(), dyt.data(), y.data(), stats.data(), GRADIENT, sums.data());
    sums_last(xl.data(), dyl.data(), yl.data(), stats.data(), GRADIENT, sums_l.data());
    close("channels-last gradient sums", sums_l, sums);
    std::vector<T> dx(total), dxl(total);
    const float m = (float)rows;
    launch(5, 64, [&] {
        if constexpr (BF16)
            normalize_grad_bf16(xt.data(), dyt.data(), y.data(), stats.data(), gamma.data(), sums.data(), EPS, dx.data(),
                                c, p, total, m, relu, batch_stats, divide);
        else
            normalize_grad(xt.data(), dyt.data(), y.data(), stats.data(), gamma.data(), sums.data(), EPS, dx.data(), c,
                           p, total, m, relu, batch_stats, divide);
    });
    launch(2, 64, [&] {
        if constexpr (BF16)
            normalize_grad_nhwc_bf16(xl.data(), dyl.data(), yl.data(), stats.data(), gamma.data(), sums.data(), EPS,
                                     dxl.data(), c, total, m, relu, batch_stats, packed);
        else
            normalize_grad_nhwc(xl.data(), dyl.data(), yl.data(), stats.data(), gamma.data(), sums.data(), EPS,
                                dxl.data(), c, total, m, relu, batch_stats, packed);
    });
    expect_same("channels-last normalize_grad", as_f(dxl), as_f(to_last(dx)));
    // A convolution's bias channels-last (src/nn/cuda/bias.rs): the NCHW
    // kernel walking planes of one point; its gradient the channels-last
    // plain sums of dy.
    std::vector<T> yb(total), ybl(total);
    launch(3, 64, [&] {
        if constexpr (BF16)
            channel_bias_bf16(xt.data(), beta.data(), yb.data(), c, p, total, relu, divide);
        else
            channel_bias(xt.data(), beta.data(), yb.data(), c, p, total, relu, divide);
    });
    launch(2, 32, [&] {
        if constexpr (BF16)
            channel_bias_bf16(xl.data(), beta.data(), ybl.data(), c, 1, total, relu, divide);
        else
            channel_bias(xl.data(), beta.data(), ybl.data(), c, 1, total, relu, divide);
    });
    expect_same("channels-last channel_bias", as_f(ybl), as_f(to_last(yb)));
    std::vector<float> db(2 * c), db_l(2 * c);
    sums_first(dyt.data(), dyt.data(), dyt.data(), nullptr, SUMS, db.data());
    sums_last(dyl.data(), dyl.data(), dyl.data(), nullptr, SUMS, db_l.data());
    close("channels-last bias gradient", db_l, db);
    return 1;
}

// The scratch data for timing convolutions: in [-1, 1), spread over it
// (every tenth of the range hit, the mean near 0), the same for a seed,
// different for another, and the bf16 version the f32 values rounded.
static int check_scratch(long n) {
    std::vector<float> a(n), b(n), other(n);
    std::vector<bf16_t> h(n);
    launch(3, 64, [&] { fill_scratch(a.data(), n, 7u); });
    launch(2, 32, [&] { fill_scratch(b.data(), n, 7u); });
    launch(3, 64, [&] { fill_scratch(other.data(), n, 8u); });
    launch(3, 64, [&] { fill_scratch_bf16(h.data(), n, 7u); });
    expect_same("fill_scratch, same seed", b, a);
    expect_same("fill_scratch_bf16", from_bf16s(h), from_bf16s(to_bf16s(a)));
    double sum = 0;
    int tenths[10] = {0}, same = 0;
    for (long i = 0; i < n; i++) {
        if (!(a[i] >= -1.f && a[i] < 1.f)) {
            std::printf("MISMATCH fill_scratch: value %g out of [-1, 1)\n", a[i]);
            failures++;
            return 1;
        }
        sum += a[i];
        tenths[std::min(9, (int)((a[i] + 1.f) * 5.f))]++;
        same += a[i] == other[i];
    }
    expect_close("fill_scratch mean", sum / n, 0.0, 0.02);
    for (int t = 0; t < 10; t++) expect_close("fill_scratch tenth", tenths[t] / (double)n, 0.1, 0.02);
    if (same > n / 100) {
        std::printf("MISMATCH fill_scratch: seeds 7 and 8 agree on %d of %ld values\n", same, n);
        failures++;
    }
    return 1;
}

int main() {
    int cases = 0;
    cases += check_bf16_rounding();
    for (int d : {0, 1}) {
        divide = d;
        cases += check_unpack_bits(15 * 3, 361, 11);
        cases += check_unpack_bits(4, 64, 12);
        cases += check_scratch(20000);
        // One block a channel, and a channel cut into runs of unequal length
        // (5 planes into 2 and 3; 3 planes into 1, 1 and 1).
        check_bias(3, 4, 25, 1, false, 7);
        check_bias(5, 2, 81, 2, true, 8);
        check_bias(3, 4, 25, 3, true, 9);
        check_bias(2, 3, 361, 2, true, 10);
        cases += 4;
        // A value at a time, and in packs of 4 (1,000 values; 1,001 cannot).
        check_residual(1000, 0, 99);
        check_residual(1000, 1, 98);
        check_residual(1001, 0, 97);
        cases += 3;
        cases += check_optimizers(1000, 5);
        cases += check_optimizers(7, 6);
        cases += check_losses(3, 15, 7);
        cases += check_losses(5, 52, 8);
        unsigned seed = 4;
        for (bool batch_stats : {true, false})
            for (bool relu : {true, false}) {
                // A channel of fewer values than a block has threads, and of
                // more; the same data in one run a channel and in several.
                for (int splits : {1, 3}) {
                    check(3, 2, 25, relu, batch_stats, splits, seed);
                    check(4, 3, 81, relu, batch_stats, splits, seed + 1);
                    cases += 2;
                }
                // 19x19 planes, more points than a block has threads.
                check(2, 2, 361, relu, batch_stats, 2, seed + 7);
                cases++;
                // More runs than the finish loads at once (RUN_LOADS), and
                // a remainder.
                check(19, 3, 9, relu, batch_stats, 19, seed + 3);
                cases++;
                cases += check_bf16_kernels(3, 4, 25, relu, batch_stats, 2, seed + 11);
                cases += check_bf16_kernels(2, 2, 361, relu, batch_stats, 1, seed + 13);
                cases += check_bf16_kernels(2, 4, 25, relu, batch_stats, 2, seed + 15);
                // Channels-last: packs of 4 f32 and 8 bf16 (8, 16 channels),
                // one value at a time (2 channels: kept per block; 3: not),
                // and 260 channels, more than a block has threads.
                cases += check_channels_last<float>(3, 8, 25, relu, batch_stats, true, 3, seed + 17);
                cases += check_channels_last<float>(2, 3, 49, relu, batch_stats, false, 2, seed + 19);
                cases += check_channels_last<bf16_t>(3, 16, 25, relu, batch_stats, true, 4, seed + 23);
                cases += check_channels_last<bf16_t>(2, 2, 361, relu, batch_stats, false, 3, seed + 29);
                cases += check_channels_last<float>(2, 260, 3, relu, batch_stats, false, 2, seed + 31);
                // More blocks than the finish loads at once, and a remainder.
                cases += check_channels_last<float>(4, 8, 25, relu, batch_stats, true, 37, seed + 37);
                seed += 2;
            }
    }
    std::printf("%d cases, %d mismatches\n", cases, failures);
    return failures == 0 ? 0 : 1;
}
