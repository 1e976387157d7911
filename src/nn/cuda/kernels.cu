// go-train's own GPU kernels (src/nn/cuda/), compiled at run time by NVRTC.
// scripts/check-cuda-build.sh compiles this file with nvcc too, so that CI
// catches an error without a GPU, and tests/cuda_emulated runs it on the CPU.
//
// Batch norm with its ReLU (src/nn/cuda/norm.rs): NCHW, p points per
// plane, c channels; stats is (2, c): the means, then the (biased)
// variances. Sums accumulate in double.
#define THREADS 256

// Activations are f32, or bf16 with `precision = bf16`: the kernels that
// read or write activations are templates over their type `T`, launched
// as NAME (f32) and NAME_bf16, and compute in f32 either way. A bf16 is
// the top half of an f32's bits, held as an unsigned short (NVRTC has no
// cuda_bf16.h without the toolkit's include path).
typedef unsigned short bf16_t;

// f32 to bf16, to nearest with ties to even, a NaN kept a (quiet) NaN: as
// candle's casts (the `half` crate) and CUDA's __float2bfloat16 round.
__device__ bf16_t to_bf16(float v) {
    const unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
    return (bf16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ float load(const float* a, long i) { return a[i]; }
__device__ float load(const bf16_t* a, long i) { return __uint_as_float((unsigned)a[i] << 16); }
__device__ void store(float* a, long i, float v) { a[i] = v; }
__device__ void store(bf16_t* a, long i, float v) { a[i] = to_bf16(v); }


// Where value i of an NCHW tensor of c channels of p points lies, kept up to
// date along a grid-stride loop: a 64-bit division or remainder costs tens
// of instructions, and one for the plane and one for the channel of every
// value took about as long as the rest of these memory-bound kernels. With
// `divide` (GO_TRAIN_CHANNEL_WALK=0, to A/B it) each value is placed by
// division, as before.
struct ChannelWalk {
    long i, stride, plane;
    int point, channel;
    // The stride as whole planes (and their count modulo c) and points left.
    long step_planes;
    int step_channels, step_points;
    int c, p;
    bool divide;

    __device__ ChannelWalk(long start, long stride_, int c_, int p_, bool divide_)
        : i(start), stride(stride_), c(c_), p(p_), divide(divide_) {
        place();
        step_planes = stride / p;
        step_points = (int)(stride - step_planes * p);
        step_channels = (int)(step_planes % c);
    }

    __device__ void place() {
        plane = i / p;
        point = (int)(i - plane * p);
        channel = (int)(plane % c);
    }

    __device__ void next() {
        i += stride;
        if (divide) {
            place();
            return;
        }
        plane += step_planes;
        point += step_points;
        channel += step_channels;
        if (point >= p) {
            point -= p;
            plane += 1;
            channel += 1;
        }
        if (channel >= c) channel -= c;  // at most 2c - 1 here
    }
};

// The walk of this thread's values in a grid-stride loop.
__device__ ChannelWalk grid_walk(int c, int p, int divide) {
    return ChannelWalk(blockIdx.x * (long)blockDim.x + threadIdx.x, (long)gridDim.x * blockDim.x, c, p, divide != 0);
}

// Per-channel values a kernel computes once a block rather than once a
// value, when the channels fit; more channels compute them a value.
// (tests/cuda_emulated sets it low, to run both ways.)
#ifndef CACHED_CHANNELS
#define CACHED_CHANNELS 1024
#endif

// x * s as candle's `Tensor * f64` computes it: affine(s, 0), so -0 becomes
// +0 (rounded by itself, never fused into a multiply-add, as on the CPU).
__device__ float scaled(float x, float s) {
    return __fadd_rn(__fmul_rn(x, s), 0.f);
}

// What channel_sums computes per channel, in two kernels (or one, the last
// block finishing: Finish below). A channel holds
// n * p values (369,664 at batch 1,024): one block a channel left most of a
// GPU idle for the few channels a net has (16 to 128), so each channel is
// cut into `splits` runs of whole planes, a block each
// (channel_partial_sums), and one thread a channel then adds up its runs in
// order (channel_finish): the same sums on every run (where the last block
// finishes them, one atomic ticket decides which block, not the order).
#define SUMS 0      // out = sum of x, sum of x * x
#define MOMENTS 1   // out = mean, biased variance of x
#define GRADIENT 2  // g = dy, zero where relu and y <= 0: out = sum of g, sum of g * (x - mean) * invstd

// What turns a channel's partial sums into `out` (2, c), as channel_finish
// does: the values a channel has (n * p, for MOMENTS) and batch norm's
// running averages to fold the moments into when `blend`. With `done` (a
// counter at 0, kept per device), the last block of a partial-sums kernel
// finishes them itself, one launch instead of two; null, channel_finish
// runs after it.
struct Finish {
    float* out;
    float* avg_mean;
    float* avg_var;
    unsigned* done;
    int n, p;
    float keep, take_mean, take_var;
    int blend;
};

// Where run `part` of a channel's sums (quantity ch) or squares (c + ch)
// lies: each block's 2c sums side by side, so that consecutive threads
// read consecutive values when they add the runs up.
__device__ long run_at(int quantity, int part, int c) {
    return (long)part * 2 * c + quantity;
}

// Quantity `quantity`'s runs added up in order, read from the L2 cache
// (__ldcg: in the last block they are other blocks' writes, which no L1
// cache of this block can hold stale). The loads go out RUN_LOADS at a
// time, before their adds: one after another, each waiting for the last,
// adding a channel's 528 runs took longer than the kernel's reading of
// the activations.
#define RUN_LOADS 16
__device__ double run_total(const double* partial, int quantity, int c, int splits) {
    double t = 0.0;
    int part = 0;
    for (; part + RUN_LOADS <= splits; part += RUN_LOADS) {
        double v[RUN_LOADS];
#pragma unroll
        for (int k = 0; k < RUN_LOADS; k++) v[k] = __ldcg(partial + run_at(quantity, part + k, c));
#pragma unroll
        for (int k = 0; k < RUN_LOADS; k++) t += v[k];
    }
    for (; part < splits; part++) t += __ldcg(partial + run_at(quantity, part, c));
    return t;
}

// Channel ch of `out` from its sum `s` and sum of squares `q`.
__device__ void finish_values(double s, double q, int ch, int c, int what, const Finish& f) {
    if (what == MOMENTS) {
        const double m = (double)f.n * f.p;
        const double mu = s / m;
        const double var = q / m - mu * mu;
        f.out[ch] = (float)mu;
        f.out[c + ch] = (float)(var > 0.0 ? var : 0.0);
        if (f.blend) {
            f.avg_mean[ch] = __fadd_rn(scaled(f.avg_mean[ch], f.keep), scaled(f.out[ch], f.take_mean));
            f.avg_var[ch] = __fadd_rn(scaled(f.avg_var[ch], f.keep), scaled(f.out[c + ch], f.take_var));
        }
    } else {
        f.out[ch] = (float)s;
        f.out[c + ch] = (float)q;
    }
}

// Channel ch of `out` from its `splits` partial sums.
__device__ void finish_channel(const double* partial, int ch, int c, int what, int splits, const Finish& f) {
    finish_values(run_total(partial, ch, c, splits), run_total(partial, c + ch, c, splits), ch, c, what, f);
}

// Channels the last block adds up a turn, a thread a quantity, their
// totals in shared memory (4 KB).
#define FINISH_CHANNELS 256

// With f.done, after every block has written its partial sums: the block
// that arrives last (each makes its writes visible before it takes a ticket,
// as in CUDA's threadFenceReduction sample) finishes every channel, in the
// same order channel_finish would, then sets the counter back to 0 for the
// next launch on the device's one stream.
__device__ void finish_in_last_block(const double* partial, int c, int what, int splits, const Finish& f) {
    if (f.done == nullptr) return;
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(f.done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // A thread a quantity (2m of them for m channels, not m), the same adds
    // in the same order as channel_finish, FINISH_CHANNELS channels a turn.
    __shared__ double totals[2 * FINISH_CHANNELS];
    for (int first = 0; first < c; first += FINISH_CHANNELS) {
        const int m = c - first < FINISH_CHANNELS ? c - first : FINISH_CHANNELS;
        for (int t = threadIdx.x; t < 2 * m; t += blockDim.x) {
            const int ch = first + (t < m ? t : t - m);
            totals[t] = run_total(partial, t < m ? ch : c + ch, c, splits);
        }
        __syncthreads();
        for (int i = threadIdx.x; i < m; i += blockDim.x) finish_values(totals[i], totals[m + i], first + i, c, what, f);
        __syncthreads();
    }
    if (threadIdx.x == 0) *f.done = 0;
}

// Block ch * splits + part sums planes [n * part / splits, n * (part + 1) /
// splits) of channel ch into its run `part` of quantities ch and c + ch
// (run_at).
template <typename T>
__device__ void channel_partial_sums_t(const T* x, const T* dy, const T* y, const float* stats, float eps,
                                       double* partial, int n, int c, int p, int what, int relu, int splits,
                                       int divide, Finish fin) {
    const int ch = blockIdx.x / splits;
    const int part = blockIdx.x - ch * splits;
    const long first = (long)n * part / splits, last = (long)n * (part + 1) / splits;
    const long m = (last - first) * p;
    float mean = 0.f, invstd = 0.f;
    if (what == GRADIENT) {
        mean = stats[ch];
        invstd = 1.f / sqrtf(stats[c + ch] + eps);
    }
    double s = 0.0, q = 0.0;
    // This thread's values of the run, THREADS apart: a walk over the run's
    // planes of one channel.
    for (ChannelWalk w(threadIdx.x, THREADS, 1, p, divide != 0); w.i < m; w.next()) {
        const long at = ((first + w.plane) * c + ch) * p + w.point;
        const float v = load(x, at);
        if (what != GRADIENT) {
            s += v;
            q += (double)v * v;
        } else {
            const float g = (relu && !(load(y, at) > 0.f)) ? 0.f : load(dy, at);
            s += g;
            q += (double)g * ((v - mean) * invstd);
        }
    }
    __shared__ double ss[THREADS];
    __shared__ double sq[THREADS];
    ss[threadIdx.x] = s;
    sq[threadIdx.x] = q;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            ss[threadIdx.x] += ss[threadIdx.x + k];
            sq[threadIdx.x] += sq[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[run_at(ch, part, c)] = ss[0];
        partial[run_at(c + ch, part, c)] = sq[0];
    }
    finish_in_last_block(partial, c, what, splits, fin);
}
extern "C" __global__ void channel_partial_sums(const float* x, const float* dy, const float* y, const float* stats,
                                                float eps, double* partial, int n, int c, int p, int what, int relu,
                                                int splits, int divide, Finish fin) {
    channel_partial_sums_t(x, dy, y, stats, eps, partial, n, c, p, what, relu, splits, divide, fin);
}
extern "C" __global__ void channel_partial_sums_bf16(const bf16_t* x, const bf16_t* dy, const bf16_t* y,
                                                     const float* stats, float eps, double* partial, int n, int c,
                                                     int p, int what, int relu, int splits, int divide,
                                                     Finish fin) {
    channel_partial_sums_t(x, dy, y, stats, eps, partial, n, c, p, what, relu, splits, divide, fin);
}

// out (2, c) from the partial sums: thread ch of the grid adds channel ch's.
// For MOMENTS with `blend`, it also folds them into batch norm's running
// averages in place, avg = keep * avg + take * out (take_var for the
// variances), as candle's ops compute it (and the CPU, to the bit).
extern "C" __global__ void channel_finish(const double* partial, float* out, int n, int c, int p, int what,
                                          int splits, float* avg_mean, float* avg_var, float keep, float take_mean,
                                          float take_var, int blend) {
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c) return;
    const Finish f = {out, avg_mean, avg_var, nullptr, n, p, keep, take_mean, take_var, blend};
    finish_channel(partial, ch, c, what, splits, f);
}

// Channel ch's scale and shift: y = x * scale + shift.
__device__ float norm_scale(const float* stats, const float* gamma, float eps, int c, int ch) {
    return gamma[ch] / sqrtf(stats[c + ch] + eps);
}
__device__ float norm_shift(const float* stats, const float* beta, float scale, int ch) {
    return beta[ch] - stats[ch] * scale;
}

// y = (x - mean) * invstd * gamma + beta, then ReLU.
template <typename T>
__device__ void normalize_t(const T* x, const float* stats, const float* gamma, const float* beta, float eps, T* y,
                            int c, int p, long total, int relu, int divide) {
    __shared__ float scales[CACHED_CHANNELS], shifts[CACHED_CHANNELS];
    const bool cached = !divide && c <= CACHED_CHANNELS;
    if (cached) {
        for (int ch = threadIdx.x; ch < c; ch += blockDim.x) {
            scales[ch] = norm_scale(stats, gamma, eps, c, ch);
            shifts[ch] = norm_shift(stats, beta, scales[ch], ch);
        }
    }
    __syncthreads();
    for (ChannelWalk w = grid_walk(c, p, divide); w.i < total; w.next()) {
        const int ch = w.channel;
        const float scale = cached ? scales[ch] : norm_scale(stats, gamma, eps, c, ch);
        const float shift = cached ? shifts[ch] : norm_shift(stats, beta, scale, ch);
        const float v = load(x, w.i) * scale + shift;
        store(y, w.i, (relu && v < 0.f) ? 0.f : v);
    }
}
extern "C" __global__ void normalize(const float* x, const float* stats, const float* gamma, const float* beta,
                                     float eps, float* y, int c, int p, long total, int relu, int divide) {
    normalize_t(x, stats, gamma, beta, eps, y, c, p, total, relu, divide);
}
extern "C" __global__ void normalize_bf16(const bf16_t* x, const float* stats, const float* gamma, const float* beta,
                                          float eps, bf16_t* y, int c, int p, long total, int relu, int divide) {
    normalize_t(x, stats, gamma, beta, eps, y, c, p, total, relu, divide);
}

// normalize_grad's per-channel values, once a block into shared memory: a
// channel's 1/std, and with batch statistics its mean gradient and its
// gradient along x's normalised values.
__device__ void cache_grad_channels(const float* stats, const float* sums, float eps, int c, float m, int batch_stats,
                                    float* invstds, float* means, float* alongs) {
    for (int ch = threadIdx.x; ch < c; ch += blockDim.x) {
        invstds[ch] = 1.f / sqrtf(stats[c + ch] + eps);
        if (batch_stats) {
            means[ch] = sums[ch] / m;
            alongs[ch] = sums[c + ch] / m;
        }
    }
}

// The input gradient, from the gradient sums of channel_sums (m values a
// channel). With batch statistics the mean and variance depend on x too.
template <typename T>
__device__ void normalize_grad_t(const T* x, const T* dy, const T* y, const float* stats, const float* gamma,
                                 const float* sums, float eps, T* dx, int c, int p, long total, float m, int relu,
                                 int batch_stats, int divide) {
    // A channel's 1/std, and its mean gradient and gradient along x's
    // normalised values, each a value.
    __shared__ float invstds[CACHED_CHANNELS], means[CACHED_CHANNELS], alongs[CACHED_CHANNELS];
    const bool cached = !divide && c <= CACHED_CHANNELS;
    if (cached) cache_grad_channels(stats, sums, eps, c, m, batch_stats, invstds, means, alongs);
    __syncthreads();
    for (ChannelWalk w = grid_walk(c, p, divide); w.i < total; w.next()) {
        const long i = w.i;
        const int ch = w.channel;
        const float invstd = cached ? invstds[ch] : 1.f / sqrtf(stats[c + ch] + eps);
        const float g = (relu && !(load(y, i) > 0.f)) ? 0.f : load(dy, i);
        float d = g;
        if (batch_stats) {
            const float mean_g = cached ? means[ch] : sums[ch] / m;
            const float along = cached ? alongs[ch] : sums[c + ch] / m;
            d = g - mean_g - (load(x, i) - stats[ch]) * invstd * along;
        }
        store(dx, i, gamma[ch] * invstd * d);
    }
}
extern "C" __global__ void normalize_grad(const float* x, const float* dy, const float* y, const float* stats,
                                          const float* gamma, const float* sums, float eps, float* dx, int c, int p,
                                          long total, float m, int relu, int batch_stats, int divide) {
    normalize_grad_t(x, dy, y, stats, gamma, sums, eps, dx, c, p, total, m, relu, batch_stats, divide);
}
extern "C" __global__ void normalize_grad_bf16(const bf16_t* x, const bf16_t* dy, const bf16_t* y, const float* stats,
                                               const float* gamma, const float* sums, float eps, bf16_t* dx, int c,
                                               int p, long total, float m, int relu, int batch_stats, int divide) {
    normalize_grad_t(x, dy, y, stats, gamma, sums, eps, dx, c, p, total, m, relu, batch_stats, divide);
}

// Channels-last (NHWC) batch norm: rows of c channels, value i's channel
// i % c (src/nn/layout.rs). Where c is a multiple of a 16-byte pack's
// values (4 f32, 8 bf16) and every buffer starts 16-byte aligned
// (`packed`), a thread moves a whole pack with one load or store: moving a
// value at a time kept too few bytes in flight, and batch norm's NCHW
// kernels took as long in bf16 as in f32 on an H100.
struct alignas(16) Pack16 {
    unsigned w[4];
};
template <typename T>
struct PackOf;
template <>
struct PackOf<float> {
    static const int N = 4;
};
template <>
struct PackOf<bf16_t> {
    static const int N = 8;
};
#define MAX_PACK 8

__device__ void load_pack(const float* a, long i, float* v) {
    const Pack16 p = *reinterpret_cast<const Pack16*>(a + i);
    for (int k = 0; k < 4; k++) v[k] = __uint_as_float(p.w[k]);
}
__device__ void load_pack(const bf16_t* a, long i, float* v) {
    const Pack16 p = *reinterpret_cast<const Pack16*>(a + i);
    for (int k = 0; k < 4; k++) {
        v[2 * k] = __uint_as_float(p.w[k] << 16);
        v[2 * k + 1] = __uint_as_float(p.w[k] & 0xffff0000u);
    }
}
__device__ void store_pack(float* a, long i, const float* v) {
    Pack16 p;
    for (int k = 0; k < 4; k++) p.w[k] = __float_as_uint(v[k]);
    *reinterpret_cast<Pack16*>(a + i) = p;
}
__device__ void store_pack(bf16_t* a, long i, const float* v) {
    Pack16 p;
    for (int k = 0; k < 4; k++) p.w[k] = (unsigned)to_bf16(v[2 * k]) | ((unsigned)to_bf16(v[2 * k + 1]) << 16);
    *reinterpret_cast<Pack16*>(a + i) = p;
}
// Whether a pointer may be read or written a pack at a time: the host
// allows packs where the tensors' offsets permit; the kernels check the
// addresses themselves too, so that no allocator's alignment is assumed.
__device__ bool aligned16(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// W values from i: one, or a pack (W = PackOf<T>::N).
template <int W, typename T>
__device__ void load_w(const T* a, long i, float* v) {
    if (W == 1) {
        v[0] = load(a, i);
    } else {
        load_pack(a, i, v);
    }
}
template <int W, typename T>
__device__ void store_w(T* a, long i, const float* v) {
    if (W == 1) {
        store(a, i, v[0]);
    } else {
        store_pack(a, i, v);
    }
}

// The first value of each of this thread's groups of `width` values of a
// channels-last tensor in a grid-stride loop: a walk over planes of one
// point, whose channel is the value's.
__device__ ChannelWalk grid_rows(int c, int width) {
    const long start = (blockIdx.x * (long)blockDim.x + threadIdx.x) * width;
    return ChannelWalk(start, (long)gridDim.x * blockDim.x * width, c, 1, false);
}

// Block b of the grid sums rows [rows * b / blocks, rows * (b + 1) / blocks)
// into its run b of quantities ch and c + ch (run_at), as
// channel_partial_sums lays out its runs for channel_finish (with n = rows,
// p = 1, splits = blocks). Thread t takes the W channels of group t %
// groups (groups = c / W) in every (THREADS / groups)-th row; one thread a
// channel then adds up the block's threads in order. With more groups than
// threads, each thread takes whole groups over all the block's rows.
template <int W, typename T>
__device__ void channel_partial_sums_nhwc_w(const T* x, const T* dy, const T* y, const float* stats, float eps,
                                            double* partial, long rows, int c, int what, int relu, double* ss,
                                            double* sq) {
    const int blocks = gridDim.x, groups = c / W;
    const int per_pass = groups < THREADS ? THREADS / groups : 1;
    const long first = rows * blockIdx.x / blocks, last = rows * (blockIdx.x + 1) / blocks;
    for (int g0 = 0; g0 < groups; g0 += THREADS) {
        const int g = per_pass > 1 ? threadIdx.x % groups : g0 + threadIdx.x;
        const int r0 = per_pass > 1 ? threadIdx.x / groups : 0;
        const bool active = per_pass > 1 ? r0 < per_pass : g < groups;
        double s[MAX_PACK], q[MAX_PACK];
        float mean[MAX_PACK], invstd[MAX_PACK];
        for (int k = 0; k < W; k++) {
            s[k] = 0.0;
            q[k] = 0.0;
            if (active && what == GRADIENT) {
                mean[k] = stats[g * W + k];
                invstd[k] = 1.f / sqrtf(stats[c + g * W + k] + eps);
            }
        }
        for (long r = first + r0; active && r < last; r += per_pass) {
            const long at = r * c + (long)g * W;
            float v[MAX_PACK];
            load_w<W>(x, at, v);
            if (what != GRADIENT) {
                for (int k = 0; k < W; k++) {
                    s[k] += v[k];
                    q[k] += (double)v[k] * v[k];
                }
            } else {
                float d[MAX_PACK], o[MAX_PACK];
                load_w<W>(dy, at, d);
                if (relu) load_w<W>(y, at, o);
                for (int k = 0; k < W; k++) {
                    const float gk = (relu && !(o[k] > 0.f)) ? 0.f : d[k];
                    s[k] += gk;
                    q[k] += (double)gk * ((v[k] - mean[k]) * invstd[k]);
                }
            }
        }
        if (per_pass == 1) {
            for (int k = 0; active && k < W; k++) {
                const int ch = g * W + k;
                partial[run_at(ch, blockIdx.x, c)] = s[k];
                partial[run_at(c + ch, blockIdx.x, c)] = q[k];
            }
            continue;
        }
        for (int k = 0; k < W; k++) {
            ss[threadIdx.x * W + k] = s[k];
            sq[threadIdx.x * W + k] = q[k];
        }
        __syncthreads();
        for (int ch = threadIdx.x; ch < c; ch += THREADS) {
            const int gc = ch / W, k = ch - gc * W;
            double a = 0.0, b = 0.0;
            for (int r = 0; r < per_pass; r++) {
                a += ss[(r * groups + gc) * W + k];
                b += sq[(r * groups + gc) * W + k];
            }
            partial[run_at(ch, blockIdx.x, c)] = a;
            partial[run_at(c + ch, blockIdx.x, c)] = b;
        }
    }
}
// The shared sums live here, not in the templates: a kernel's shared
// memory is every array any of its code declares, and two packs' worth
// would pass the 48 KB a block may declare.
template <typename T>
__device__ void channel_partial_sums_nhwc_t(const T* x, const T* dy, const T* y, const float* stats, float eps,
                                            double* partial, long rows, int c, int what, int relu, int packed,
                                            Finish fin) {
    __shared__ double ss[THREADS * MAX_PACK], sq[THREADS * MAX_PACK];
    if (packed && aligned16(x) && aligned16(dy) && aligned16(y)) {
        channel_partial_sums_nhwc_w<PackOf<T>::N>(x, dy, y, stats, eps, partial, rows, c, what, relu, ss, sq);
    } else {
        channel_partial_sums_nhwc_w<1>(x, dy, y, stats, eps, partial, rows, c, what, relu, ss, sq);
    }
    finish_in_last_block(partial, c, what, gridDim.x, fin);
}
extern "C" __global__ void channel_partial_sums_nhwc(const float* x, const float* dy, const float* y,
                                                     const float* stats, float eps, double* partial, long rows, int c,
                                                     int what, int relu, int packed, Finish fin) {
    channel_partial_sums_nhwc_t(x, dy, y, stats, eps, partial, rows, c, what, relu, packed, fin);
}
extern "C" __global__ void channel_partial_sums_nhwc_bf16(const bf16_t* x, const bf16_t* dy, const bf16_t* y,
                                                          const float* stats, float eps, double* partial, long rows,
                                                          int c, int what, int relu, int packed, Finish fin) {
    channel_partial_sums_nhwc_t(x, dy, y, stats, eps, partial, rows, c, what, relu, packed, fin);
}

// normalize, channels-last: the same arithmetic a value.
template <int W, typename T>
__device__ void normalize_nhwc_w(const T* x, const float* stats, const float* gamma, const float* beta, float eps,
                                 T* y, int c, long total, int relu, const float* scales, const float* shifts,
                                 bool cached) {
    for (ChannelWalk w = grid_rows(c, W); w.i < total; w.next()) {
        float v[MAX_PACK];
        load_w<W>(x, w.i, v);
        for (int k = 0; k < W; k++) {
            const int ch = w.channel + k;
            const float scale = cached ? scales[ch] : norm_scale(stats, gamma, eps, c, ch);
            const float shift = cached ? shifts[ch] : norm_shift(stats, beta, scale, ch);
            const float u = v[k] * scale + shift;
            v[k] = (relu && u < 0.f) ? 0.f : u;
        }
        store_w<W>(y, w.i, v);
    }
}
template <typename T>
__device__ void normalize_nhwc_t(const T* x, const float* stats, const float* gamma, const float* beta, float eps,
                                 T* y, int c, long total, int relu, int packed) {
    __shared__ float scales[CACHED_CHANNELS], shifts[CACHED_CHANNELS];
    const bool cached = c <= CACHED_CHANNELS;
    if (cached) {
        for (int ch = threadIdx.x; ch < c; ch += blockDim.x) {
            scales[ch] = norm_scale(stats, gamma, eps, c, ch);
            shifts[ch] = norm_shift(stats, beta, scales[ch], ch);
        }
    }
    __syncthreads();
    if (packed && aligned16(x) && aligned16(y)) {
        normalize_nhwc_w<PackOf<T>::N>(x, stats, gamma, beta, eps, y, c, total, relu, scales, shifts, cached);
    } else {
        normalize_nhwc_w<1>(x, stats, gamma, beta, eps, y, c, total, relu, scales, shifts, cached);
    }
}
extern "C" __global__ void normalize_nhwc(const float* x, const float* stats, const float* gamma, const float* beta,
                                          float eps, float* y, int c, long total, int relu, int packed) {
    normalize_nhwc_t(x, stats, gamma, beta, eps, y, c, total, relu, packed);
}
extern "C" __global__ void normalize_nhwc_bf16(const bf16_t* x, const float* stats, const float* gamma,
                                               const float* beta, float eps, bf16_t* y, int c, long total, int relu,
                                               int packed) {
    normalize_nhwc_t(x, stats, gamma, beta, eps, y, c, total, relu, packed);
}

// normalize_grad, channels-last: the same arithmetic a value.
template <int W, typename T>
__device__ void normalize_grad_nhwc_w(const T* x, const T* dy, const T* y, const float* stats, const float* gamma,
                                      const float* sums, float eps, T* dx, int c, long total, float m, int relu,
                                      int batch_stats, const float* invstds, const float* means, const float* alongs,
                                      bool cached) {
    for (ChannelWalk w = grid_rows(c, W); w.i < total; w.next()) {
        float v[MAX_PACK], d[MAX_PACK], o[MAX_PACK];
        load_w<W>(x, w.i, v);
        load_w<W>(dy, w.i, d);
        if (relu) load_w<W>(y, w.i, o);
        for (int k = 0; k < W; k++) {
            const int ch = w.channel + k;
            const float invstd = cached ? invstds[ch] : 1.f / sqrtf(stats[c + ch] + eps);
            const float g = (relu && !(o[k] > 0.f)) ? 0.f : d[k];
            float e = g;
            if (batch_stats) {
                const float mean_g = cached ? means[ch] : sums[ch] / m;
                const float along = cached ? alongs[ch] : sums[c + ch] / m;
                e = g - mean_g - (v[k] - stats[ch]) * invstd * along;
            }
            v[k] = gamma[ch] * invstd * e;
        }
        store_w<W>(dx, w.i, v);
    }
}
template <typename T>
__device__ void normalize_grad_nhwc_t(const T* x, const T* dy, const T* y, const float* stats, const float* gamma,
                                      const float* sums, float eps, T* dx, int c, long total, float m, int relu,
                                      int batch_stats, int packed) {
    __shared__ float invstds[CACHED_CHANNELS], means[CACHED_CHANNELS], alongs[CACHED_CHANNELS];
    const bool cached = c <= CACHED_CHANNELS;
    if (cached) cache_grad_channels(stats, sums, eps, c, m, batch_stats, invstds, means, alongs);
    __syncthreads();
    if (packed && aligned16(x) && aligned16(dy) && aligned16(y) && aligned16(dx)) {
        normalize_grad_nhwc_w<PackOf<T>::N>(x, dy, y, stats, gamma, sums, eps, dx, c, total, m, relu, batch_stats,
                                            invstds, means, alongs, cached);
    } else {
        normalize_grad_nhwc_w<1>(x, dy, y, stats, gamma, sums, eps, dx, c, total, m, relu, batch_stats, invstds,
                                 means, alongs, cached);
    }
}
extern "C" __global__ void normalize_grad_nhwc(const float* x, const float* dy, const float* y, const float* stats,
                                               const float* gamma, const float* sums, float eps, float* dx, int c,
                                               long total, float m, int relu, int batch_stats, int packed) {
    normalize_grad_nhwc_t(x, dy, y, stats, gamma, sums, eps, dx, c, total, m, relu, batch_stats, packed);
}
extern "C" __global__ void normalize_grad_nhwc_bf16(const bf16_t* x, const bf16_t* dy, const bf16_t* y,
                                                    const float* stats, const float* gamma, const float* sums,
                                                    float eps, bf16_t* dx, int c, long total, float m, int relu,
                                                    int batch_stats, int packed) {
    normalize_grad_nhwc_t(x, dy, y, stats, gamma, sums, eps, dx, c, total, m, relu, batch_stats, packed);
}

// A convolution's bias (src/nn/cuda/bias.rs): y = x + b[channel], then
// the ReLU when `relu`.
// The bias itself stays f32 (a weight).
template <typename T>
__device__ void channel_bias_t(const T* x, const float* b, T* y, int c, int p, long total, int relu, int divide) {
    for (ChannelWalk w = grid_walk(c, p, divide); w.i < total; w.next()) {
        const float v = load(x, w.i) + b[w.channel];
        store(y, w.i, (relu && v < 0.f) ? 0.f : v);
    }
}
extern "C" __global__ void channel_bias(const float* x, const float* b, float* y, int c, int p, long total, int relu,
                                        int divide) {
    channel_bias_t(x, b, y, c, p, total, relu, divide);
}
extern "C" __global__ void channel_bias_bf16(const bf16_t* x, const float* b, bf16_t* y, int c, int p, long total,
                                             int relu, int divide) {
    channel_bias_t(x, b, y, c, p, total, relu, divide);
}

// The residual end and its gradient (src/nn/cuda/residual.rs): `Op` on
// each pair of values of two tensors; `packed` (total a multiple of a
// pack's values, the buffers 16-byte aligned) moves 16 bytes a load.
template <typename Op, int W, typename T>
__device__ void pairwise_w(const T* a, const T* b, T* out, long total) {
    const long stride = (long)gridDim.x * blockDim.x * W;
    for (long i = (blockIdx.x * (long)blockDim.x + threadIdx.x) * W; i < total; i += stride) {
        float u[MAX_PACK], v[MAX_PACK];
        load_w<W>(a, i, u);
        load_w<W>(b, i, v);
        for (int k = 0; k < W; k++) u[k] = Op::apply(u[k], v[k]);
        store_w<W>(out, i, u);
    }
}
template <typename Op, typename T>
__device__ void pairwise_t(const T* a, const T* b, T* out, long total, int packed) {
    if (packed && aligned16(a) && aligned16(b) && aligned16(out)) {
        pairwise_w<Op, PackOf<T>::N>(a, b, out, total);
    } else {
        pairwise_w<Op, 1>(a, b, out, total);
    }
}

// y = max(x + skip, 0).
struct ResidualRelu {
    __device__ static float apply(float x, float skip) {
        const float v = x + skip;
        return v > 0.f ? v : 0.f;
    }
};
extern "C" __global__ void residual_relu(const float* x, const float* skip, float* y, long total, int packed) {
    pairwise_t<ResidualRelu>(x, skip, y, total, packed);
}
extern "C" __global__ void residual_relu_bf16(const bf16_t* x, const bf16_t* skip, bf16_t* y, long total, int packed) {
    pairwise_t<ResidualRelu>(x, skip, y, total, packed);
}

// Its gradient, the same for x and skip: dy where y > 0.
struct ReluGrad {
    __device__ static float apply(float y, float dy) { return y > 0.f ? dy : 0.f; }
};
extern "C" __global__ void relu_grad(const float* y, const float* dy, float* g, long total, int packed) {
    pairwise_t<ReluGrad>(y, dy, g, total, packed);
}
extern "C" __global__ void relu_grad_bf16(const bf16_t* y, const bf16_t* dy, bf16_t* g, long total, int packed) {
    pairwise_t<ReluGrad>(y, dy, g, total, packed);
}

// The optimizers' in-place updates (src/train/optim_kernels.rs, launched by
// src/nn/cuda/update.rs), value by value the f32 arithmetic of their CPU
// versions: every product and sum rounded by itself (the _rn intrinsics,
// which the compiler never fuses into a multiply-add), so that a step on
// the GPU leaves the weights and state a step on the CPU leaves, to the bit.

// The gradient with its L2 penalty, g + w * wd, when has_wd.
__device__ float penalised(float g, float w, float wd, int has_wd) {
    return has_wd ? __fadd_rn(g, scaled(w, wd)) : g;
}

// The optimizers update every parameter of a net in one launch: `table`
// holds a row of TABLE_COLUMNS 64-bit words a tensor (its buffers'
// addresses, the offset of its first value among all the tensors' values,
// and numbers of its own), the rows in the order of their offsets, and
// each thread finds the tensor of its value by bisection.
#define TABLE_COLUMNS 8
#define COL_W 0
#define COL_G 1
#define COL_S1 2
#define COL_S2 3
#define COL_START 4
#define COL_A 5
#define COL_B 6

// The row of the tensor that value i of all the tensors belongs to.
__device__ const unsigned long long* table_row(const unsigned long long* table, int count, long i) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if ((long)table[mid * TABLE_COLUMNS + COL_START] <= i) lo = mid; else hi = mid - 1;
    }
    return table + lo * TABLE_COLUMNS;
}

__device__ float* column(const unsigned long long* row, int col) { return (float*)row[col]; }

// SGD over `total` values of `count` tensors; a row: w, g, the momentum
// buffer v (unused without momentum), start, and a nonzero COL_A on the
// tensor's first step. With momentum: v = g' (first step) or momentum * v
// + g', then w -= lr * v; without: w -= lr * g'.
extern "C" __global__ void sgd_tensors(const unsigned long long* table, int count, long total, float momentum,
                                       int has_momentum, float wd, int has_wd, float lr) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        const unsigned long long* row = table_row(table, count, i);
        const long j = i - (long)row[COL_START];
        float* w = column(row, COL_W);
        const float gi = penalised(column(row, COL_G)[j], w[j], wd, has_wd);
        if (has_momentum) {
            float* v = column(row, COL_S1);
            v[j] = row[COL_A] ? gi : __fadd_rn(scaled(v[j], momentum), gi);
            w[j] = __fsub_rn(w[j], scaled(v[j], lr));
        } else {
            w[j] = __fsub_rn(w[j], scaled(gi, lr));
        }
    }
}

// Adam over `total` values of `count` tensors; a row: w, g, the moments m
// and v, start, and the tensor's step size and 1/sqrt(1 - beta2^t) as the
// bits of floats (PyTorch counts steps a parameter):
// m = beta1 * m + (1 - beta1) * g', v = beta2 * v + (1 - beta2) * g'^2,
// w -= step * m / (sqrt(v) * inv_bc2 + eps).
extern "C" __global__ void adam_tensors(const unsigned long long* table, int count, long total, float beta1,
                                        float one_minus_beta1, float beta2, float one_minus_beta2, float wd,
                                        int has_wd, float eps) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        const unsigned long long* row = table_row(table, count, i);
        const long j = i - (long)row[COL_START];
        float *w = column(row, COL_W), *m = column(row, COL_S1), *v = column(row, COL_S2);
        const float step = __int_as_float((int)row[COL_A]), inv_bc2 = __int_as_float((int)row[COL_B]);
        const float gi = penalised(column(row, COL_G)[j], w[j], wd, has_wd);
        m[j] = __fadd_rn(scaled(m[j], beta1), scaled(gi, one_minus_beta1));
        v[j] = __fadd_rn(scaled(v[j], beta2), scaled(__fmul_rn(gi, gi), one_minus_beta2));
        const float denom = __fadd_rn(scaled(__fsqrt_rn(v[j]), inv_bc2), eps);
        w[j] = __fsub_rn(w[j], scaled(__fdiv_rn(m[j], denom), step));
    }
}

// The training losses' last steps (src/nn/loss.rs, launched by
// src/nn/cuda/loss.rs): a move net's masked log-softmax and the negative
// log-likelihood of the played moves, a value net's mean squared error,
// forward and backward, each one kernel where candle's ops take some 45.
// The same arithmetic as the CPU's ops, the sums in another order.

// e^x, flushing results below the smallest normal f32 to 0 as the CPU's
// ops do (the masked points' exponents are about -1e9).
__device__ float flushed_exp(float x) {
    return x < -87.33654f ? 0.f : expf(x);
}

// The block's THREADS values in `red` (shared) reduced to red[0] by max
// (want_max) or sum; every thread gets the result.
__device__ float block_reduce(float* red, float v, int want_max) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) {
            red[threadIdx.x] = want_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + k]) : red[threadIdx.x] + red[threadIdx.x + k];
        }
        __syncthreads();
    }
    const float r = red[0];
    __syncthreads();
    return r;
}

// Block b: row b of `logits` (moves values), the points whose empty plane
// in `planes` (n_planes planes of `points` a sample) is 0 given
// logit + (empty * scale + shift), then log-softmax into `out`.
extern "C" __global__ void masked_log_softmax(const float* logits, const float* planes, float* out, int n_planes,
                                              int empty_plane, int points, int moves, float scale, float shift) {
    __shared__ float red[THREADS];
    const long row = (long)blockIdx.x * moves;
    const float* empty = planes + ((long)blockIdx.x * n_planes + empty_plane) * points;
    float max = -3.402823466e38f;
    for (int j = threadIdx.x; j < moves; j += THREADS) {
        const float legal = j < points ? empty[j] : 1.f;
        const float v = logits[row + j] + (legal * scale + shift);
        out[row + j] = v;
        max = fmaxf(max, v);
    }
    max = block_reduce(red, max, 1);
    float sum = 0.f;
    for (int j = threadIdx.x; j < moves; j += THREADS) sum += flushed_exp(out[row + j] - max);
    const float log_sum = logf(block_reduce(red, sum, 0));
    for (int j = threadIdx.x; j < moves; j += THREADS) out[row + j] = (out[row + j] - max) - log_sum;
}

// Its gradient, block b for row b: dx = dy - softmax * sum(dy).
extern "C" __global__ void log_softmax_grad(const float* logp, const float* dy, float* dx, int moves) {
    __shared__ float red[THREADS];
    const long row = (long)blockIdx.x * moves;
    float total = 0.f;
    for (int j = threadIdx.x; j < moves; j += THREADS) total += dy[row + j];
    total = block_reduce(red, total, 0);
    for (int j = threadIdx.x; j < moves; j += THREADS) dx[row + j] = dy[row + j] - flushed_exp(logp[row + j]) * total;
}

// One block: out[0] = scale * the sum of logp[b][target[b]] (scale -1/batch);
// a target outside the moves makes it NaN, which stops training.
extern "C" __global__ void nll_forward(const float* logp, const unsigned* target, float* out, int batch, int moves,
                                       float scale) {
    __shared__ float red[THREADS];
    float sum = 0.f;
    for (int b = threadIdx.x; b < batch; b += THREADS) {
        sum += target[b] < (unsigned)moves ? logp[(long)b * moves + target[b]] : __int_as_float(0x7fc00000);
    }
    sum = block_reduce(red, sum, 0);
    if (threadIdx.x == 0) out[0] = sum * scale + 0.f;
}

// Its gradient: dy[0] * scale at each row's target, 0 elsewhere.
extern "C" __global__ void nll_grad(const unsigned* target, const float* dy, float* d, int moves, float scale, long total) {
    const float g = dy[0] * scale;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        d[i] = (long)target[i / moves] == i % moves ? g : 0.f;
    }
}

// One block: out[0] = scale * the sum of (p - t)^2 (scale 1/n).
extern "C" __global__ void mse_forward(const float* p, const float* t, float* out, long n, float scale) {
    __shared__ float red[THREADS];
    float sum = 0.f;
    for (long i = threadIdx.x; i < n; i += THREADS) sum += (p[i] - t[i]) * (p[i] - t[i]);
    sum = block_reduce(red, sum, 0);
    if (threadIdx.x == 0) out[0] = sum * scale + 0.f;
}

// Its gradient: 2 (p - t) * dy[0] * scale.
extern "C" __global__ void mse_grad(const float* p, const float* t, const float* dy, float* d, float scale, long n) {
    const float g = dy[0] * scale;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        d[i] = 2.f * (p[i] - t[i]) * g;
    }
}

// A batch's input planes from their bits (src/nn/cuda/upload.rs): planes
// of `points` points, each `words_per_plane` 64-bit words with point i at
// bit i % 64 of word i / 64, into `planes * points` floats of 0 or 1.
extern "C" __global__ void unpack_bits(const unsigned long long* words, float* out, int points, int words_per_plane,
                                       long planes, int divide) {
    const long total = planes * points;
    for (ChannelWalk w = grid_walk(1, points, divide); w.i < total; w.next()) {
        const unsigned long long word = words[w.plane * words_per_plane + (w.point >> 6)];
        out[w.i] = (float)((word >> (w.point & 63)) & 1ull);
    }
}

// Scratch data for timing cuDNN's algorithms (src/nn/cuda/cudnn_conv.rs):
// value i is a hash of (seed, i) spread over [-1, 1), so that a timing sees
// data like a net's rather than zeros, which some hardware paths run
// faster on.
__device__ float scratch_value(unsigned seed, long i) {
    unsigned h = (unsigned)i * 0x9e3779b9u ^ (unsigned)(i >> 32) * 0x85ebca6bu ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return (float)(h >> 8) * (2.f / 16777216.f) - 1.f;
}
template <typename T>
__device__ void fill_scratch_t(T* a, long n, unsigned seed) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        store(a, i, scratch_value(seed, i));
    }
}
extern "C" __global__ void fill_scratch(float* a, long n, unsigned seed) { fill_scratch_t(a, n, seed); }
extern "C" __global__ void fill_scratch_bf16(bf16_t* a, long n, unsigned seed) { fill_scratch_t(a, n, seed); }
