//! Java `.properties` syntax as `Properties.load` reads it: MirrorMaker 2 files and Kafka's
//! `FileConfigProvider` (`${file:/path:key}`) both use it.

use std::path::Path;

use crate::error::ConfigError;

/// One entry of a `.properties` file after Java's unescaping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prop {
    pub(crate) key: String,
    pub(crate) value: String,
    /// 1-based line the entry starts on.
    pub(crate) line: usize,
    /// The first `\c` in the value whose backslash Java dropped (e.g. `\.`): usually a regex
    /// escape written with one backslash where the properties format needs two.
    pub(crate) dropped_escape: Option<String>,
}

/// The blanks `Properties.load` skips and splits on (not newlines, not other Unicode spaces).
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Entries in file order, as `Properties.load` reads them (a later duplicate wins when they are
/// put in a map).
pub(crate) fn parse_properties(path: &Path, text: &str) -> Result<Vec<Prop>, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut props = Vec::new();
    // A logical line being continued: the line it started on and its text so far.
    let mut pending: Option<(usize, String)> = None;
    for (i, natural) in natural_lines(text).into_iter().enumerate() {
        let line = natural.trim_start_matches(is_blank);
        let (start, mut logical) = match pending.take() {
            Some(p) => p,
            // Comments cannot be continued, and `#` only starts one at the start of a logical line.
            None if line.is_empty() || line.starts_with(['#', '!']) => continue,
            None => (i + 1, String::new()),
        };
        let backslashes = line.chars().rev().take_while(|&c| c == '\\').count();
        if backslashes % 2 == 1 {
            logical.push_str(&line[..line.len() - 1]);
            pending = Some((start, logical));
        } else {
            logical.push_str(line);
            props.extend(split_entry(path, start, &logical)?);
        }
    }
    // A continuation at the very end of the file: Java drops the backslash and keeps the entry.
    if let Some((start, logical)) = pending {
        props.extend(split_entry(path, start, &logical)?);
    }
    Ok(props)
}

/// Lines ended by `\n`, `\r\n` or `\r`, as Java's `LineReader` ends them.
fn natural_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                i += 1;
                if bytes.get(i) == Some(&b'\n') {
                    i += 1;
                }
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Splits a logical line into key and value: the key ends at the first unescaped `=`, `:` or
/// blank; blanks and at most one `=`/`:` after it are skipped; the value keeps trailing blanks.
fn split_entry(path: &Path, line: usize, logical: &str) -> Result<Option<Prop>, ConfigError> {
    let chars: Vec<char> = logical.chars().collect();
    let mut key_end = chars.len();
    let mut value_start = chars.len();
    let mut has_separator = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if !escaped && (c == '=' || c == ':' || is_blank(c)) {
            key_end = i;
            value_start = i + 1;
            has_separator = c == '=' || c == ':';
            break;
        }
        escaped = c == '\\' && !escaped;
    }
    while let Some(&c) = chars.get(value_start) {
        if !is_blank(c) {
            if has_separator || (c != '=' && c != ':') {
                break;
            }
            has_separator = true;
        }
        value_start += 1;
    }
    let error = |key: String, message: String| ConfigError {
        file: path.to_path_buf(),
        line: Some(line),
        key,
        message,
    };
    let raw_key: String = chars[..key_end].iter().collect();
    let (key, _) = unescape(&chars[..key_end]).map_err(|m| error(raw_key.clone(), m))?;
    let (value, dropped_escape) =
        unescape(&chars[value_start..]).map_err(|m| error(key.clone(), m))?;
    // An entry without a key means nothing to MirrorMaker 2.
    if key.is_empty() {
        return Ok(None);
    }
    Ok(Some(Prop {
        key,
        value,
        line,
        dropped_escape,
    }))
}

/// Java's `loadConvert`: resolves escapes; returns the text and the first escape whose backslash
/// was dropped that is not one of the properties format's own (`\=`, `\:`, `\#`, `\!`, `\ `...).
fn unescape(chars: &[char]) -> Result<(String, Option<String>), String> {
    let mut units: Vec<u16> = Vec::with_capacity(chars.len());
    let mut dropped = None;
    let mut buf = [0u16; 2];
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        i += 1;
        let c = if c != '\\' {
            c
        } else {
            // A lone backslash at the end cannot survive line joining; Java would drop it too.
            let Some(&escape) = chars.get(i) else { break };
            i += 1;
            match escape {
                't' => '\t',
                'n' => '\n',
                'r' => '\r',
                'f' => '\x0c',
                'u' => {
                    let hex = chars
                        .get(i..i + 4)
                        .filter(|h| h.iter().all(char::is_ascii_hexdigit));
                    let Some(hex) = hex else {
                        return Err("malformed \\uXXXX escape: `\\u` needs four hex digits".into());
                    };
                    let hex: String = hex.iter().collect();
                    // UTF-16 code units, so that `\uD83D\uDE00` pairs up as in Java.
                    units.push(u16::from_str_radix(&hex, 16).map_err(|e| e.to_string())?);
                    i += 4;
                    continue;
                }
                other => {
                    let own = matches!(other, '=' | ':' | '#' | '!' | '\\' | '"' | '\'')
                        || is_blank(other);
                    if !own && dropped.is_none() {
                        dropped = Some(format!("\\{other}"));
                    }
                    other
                }
            }
        };
        units.extend_from_slice(c.encode_utf16(&mut buf));
    }
    Ok((String::from_utf16_lossy(&units), dropped))
}
