//! Turning a file's bytes into text.
//!
//! SGF declares its charset in the root's `CA` property, which can only be
//! read after decoding; but every charset seen in Go files keeps ASCII bytes
//! (and so `CA[...]`) as they are, so the declaration is found in the raw
//! bytes first. Text is decoded as a whole before parsing because some
//! charsets (Shift_JIS) use `\` and `]` as second bytes of characters.

use std::borrow::Cow;

use encoding_rs::{Encoding, WINDOWS_1252};

/// Decodes SGF bytes: a byte-order mark wins; then valid UTF-8 is taken as
/// is; otherwise the charset named by `CA[...]`, and Windows-1252 (Latin-1
/// for all printable characters) when there is none or it is unknown or
/// cannot be right. Undecodable bytes become U+FFFD; never fails.
pub(crate) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        return encoding.decode_without_bom_handling(&bytes[bom_len..]).0;
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let declared = declared_charset(bytes).and_then(charset_encoding);
    // A file in UTF-8 (declared, or declaring nothing) with a few bad bytes
    // (a cut character, a stray Latin-1 byte) stays UTF-8, only the bad
    // bytes replaced: read as Windows-1252 every name would be garbled. A
    // Latin-1 file mislabelled UTF-8 has no valid multi-byte character.
    if declared.is_none_or(|e| e == encoding_rs::UTF_8) && mostly_utf8(bytes) {
        return String::from_utf8_lossy(bytes);
    }
    // A file declaring UTF-8 that is not was mislabelled by its writer,
    // and one declaring UTF-16 (say) cannot be, as its `CA` was just read
    // as ASCII.
    let encoding = declared.filter(|e| e.is_ascii_compatible() && *e != encoding_rs::UTF_8).unwrap_or(WINDOWS_1252);
    encoding.decode_without_bom_handling(bytes).0
}

/// Whether valid multi-byte UTF-8 characters outnumber the bytes that are
/// not UTF-8.
fn mostly_utf8(bytes: &[u8]) -> bool {
    let (mut characters, mut bad) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        characters += chunk.valid().chars().filter(|c| !c.is_ascii()).count();
        bad += chunk.invalid().len();
    }
    characters > bad
}

/// The value of the first `CA[...]` property in the raw bytes.
fn declared_charset(bytes: &[u8]) -> Option<&[u8]> {
    let mut from = 0;
    while let Some(offset) = find(&bytes[from..], b"CA") {
        let at = from + offset;
        from = at + 2;
        // `CA` must be a whole identifier, not the end of e.g. `ECA`.
        if at > 0 && bytes[at - 1].is_ascii_uppercase() {
            continue;
        }
        let rest = &bytes[from..];
        let open = rest.iter().position(|b| !b.is_ascii_whitespace())?;
        if rest[open] != b'[' {
            continue;
        }
        let value = &rest[open + 1..];
        let close = value.iter().position(|&b| b == b']')?;
        return Some(value[..close].trim_ascii());
    }
    None
}

/// The encoding a charset name denotes, accepting `_` for `-` as some
/// writers do (`ISO8859_1`).
fn charset_encoding(name: &[u8]) -> Option<&'static Encoding> {
    Encoding::for_label_no_replacement(name).or_else(|| {
        let dashed: Vec<u8> = name.iter().map(|&b| if b == b'_' { b'-' } else { b }).collect();
        Encoding::for_label_no_replacement(&dashed)
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(text: &str, charset: &str) -> Vec<u8> {
        let encoding = Encoding::for_label(charset.as_bytes()).unwrap();
        let (bytes, _, unmappable) = encoding.encode(text);
        assert!(!unmappable);
        bytes.into_owned()
    }

    #[test]
    fn utf8_is_borrowed_as_is() {
        let text = "(;CA[UTF-8]PW[白])";
        assert!(matches!(decode(text.as_bytes()), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn declared_charsets_are_honoured() {
        for (charset, text) in [
            ("GB2312", "(;CA[GB2312]PW[白]C[盘面])"),
            ("Shift_JIS", "(;CA[Shift_JIS]PW[ソ表]C[\\]])"),
            ("EUC-KR", "(;CA[EUC-KR]PW[이창호])"),
            ("ISO-8859-1", "(;CA[ISO-8859-1]PW[Müller])"),
            ("ISO-8859-1", "(;CA[ISO8859_1]PW[Müller])"),
            ("ISO-8859-1", "(;CA [ latin1 ] PW[Müller])"),
        ] {
            assert_eq!(decode(&encode(text, charset)), text, "{charset}");
        }
    }

    #[test]
    fn undeclared_or_wrong_charset_falls_back_to_windows_1252() {
        assert_eq!(decode(b"(;C[cr\xe9\xe9])"), "(;C[créé])");
        assert_eq!(decode(b"(;CA[UTF-8]C[h\xf6rru])"), "(;CA[UTF-8]C[hörru])");
        assert_eq!(decode(b"(;CA[no-such]C[\xe9])"), "(;CA[no-such]C[é])");
        assert_eq!(decode(b"(;ECA[GB2312]C[\xe9])"), "(;ECA[GB2312]C[é])");
        assert_eq!(decode(b"(;CA[UTF-16]C[\xe9])"), "(;CA[UTF-16]C[é])");
    }

    #[test]
    fn utf8_with_a_bad_byte_keeps_its_names() {
        let bytes = b"(;CA[UTF-8]PB[\xe6\x9d\x8e\xe6\x98\x8c\xe9\x8e\xac]PW[M\xc3\xbcller]C[\xff])";
        assert_eq!(decode(bytes), "(;CA[UTF-8]PB[李昌鎬]PW[Müller]C[\u{fffd}])");
        assert_eq!(decode(&bytes[11..]), "PB[李昌鎬]PW[Müller]C[\u{fffd}])");
    }

    #[test]
    fn byte_order_marks_decide() {
        assert_eq!(decode(b"\xef\xbb\xbf(;GM[1])"), "(;GM[1])");
        assert_eq!(decode(b"\xff\xfe(\0;\0)\0"), "(;)");
    }

    #[test]
    fn never_panics_on_garbage() {
        for bytes in [
            &b"CA["[..],
            b"CA",
            b"\xff\xff\xff",
            b"CA[GB2312]\xff\xff\x80",
            b"CA[UTF-16]\xe9",
            b"CA[ISO-2022-JP]\xe9\x1b$B",
        ] {
            let _ = decode(bytes);
        }
    }
}
