//! Text templates with `${name}` placeholders, for config values such as header values and topics.
//!
//! ```
//! use refract_plugin_sdk::template::{Placeholder, Template};
//!
//! let template = Template::parse("${topic}-$$-${header:tenant}", &["topic"], true)?;
//! let text = template.render(|placeholder, out| match placeholder {
//!     Placeholder::Variable(0) => out.push_str("orders"),
//!     Placeholder::Header(name) => out.push_str(name),
//!     Placeholder::Variable(_) => {}
//! });
//! assert_eq!(text, "orders-$-tenant");
//! # Ok::<(), String>(())
//! ```

/// A placeholder of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    /// `${name}`: the index of `name` in the variables the template was parsed with.
    Variable(usize),
    /// `${header:NAME}`: a record header.
    Header(String),
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Text copied as it is.
    Literal(String),
    /// Text filled in when rendering.
    Placeholder(Placeholder),
}

/// Text with `${variable}` (and optionally `${header:NAME}`) placeholders; `$$` is a literal `$`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text`, accepting the placeholders `${v}` for each `v` of `variables` and, when
    /// `headers` is true, `${header:NAME}`. The error says what is wrong, without a key path.
    pub fn parse(text: &str, variables: &[&str], headers: bool) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(dollar) = rest.find('$') {
            literal.push_str(&rest[..dollar]);
            let after = &rest[dollar + 1..];
            if let Some(tail) = after.strip_prefix('$') {
                literal.push('$');
                rest = tail;
                continue;
            }
            let Some(inner) = after.strip_prefix('{') else {
                return Err(format!(
                    "`$` at byte {dollar} starts no placeholder; write `$$` for a literal `$`"
                ));
            };
            let Some(close) = inner.find('}') else {
                return Err("unclosed `${`".to_owned());
            };
            let name = &inner[..close];
            let placeholder = if let Some(variable) = variables.iter().position(|v| *v == name) {
                Placeholder::Variable(variable)
            } else if let Some(header) = name.strip_prefix("header:").filter(|_| headers) {
                if header.is_empty() {
                    return Err("`${header:}` names no header".to_owned());
                }
                Placeholder::Header(header.to_owned())
            } else {
                let mut known: Vec<String> =
                    variables.iter().map(|v| format!("${{{v}}}")).collect();
                if headers {
                    known.push("${header:NAME}".to_owned());
                }
                return Err(format!(
                    "unknown placeholder `${{{name}}}`; expected one of: {}",
                    known.join(", ")
                ));
            };
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(Piece::Placeholder(placeholder));
            rest = &inner[close + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Self { pieces })
    }

    /// Whether the template has no placeholders.
    pub fn is_literal(&self) -> bool {
        self.pieces
            .iter()
            .all(|piece| matches!(piece, Piece::Literal(_)))
    }

    /// The placeholders of the template, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Placeholder(placeholder) => Some(placeholder),
            Piece::Literal(_) => None,
        })
    }

    /// The text with each placeholder replaced by what `fill` appends for it.
    pub fn render(&self, mut fill: impl FnMut(&Placeholder, &mut String)) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Placeholder(placeholder) => fill(placeholder, &mut out),
            }
        }
        out
    }

    /// Like [`render`](Self::render), but `fill` may fail, which stops the rendering.
    pub fn try_render<E>(
        &self,
        mut fill: impl FnMut(&Placeholder, &mut String) -> Result<(), E>,
    ) -> Result<String, E> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Placeholder(placeholder) => fill(placeholder, &mut out)?,
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARS: &[&str] = &["topic", "partition"];

    fn show(template: &Template) -> String {
        template.render(|placeholder, out| match placeholder {
            Placeholder::Variable(index) => out.push_str(&format!("<{}>", VARS[*index])),
            Placeholder::Header(name) => out.push_str(&format!("<h:{name}>")),
        })
    }

    #[test]
    fn parses_and_renders() {
        let cases = [
            ("", "", true),
            ("plain", "plain", true),
            ("$$", "$", true),
            ("a-${topic}", "a-<topic>", false),
            ("${topic}${partition}", "<topic><partition>", false),
            ("${header:x-id}.$${topic}", "<h:x-id>.${topic}", false),
            ("é${topic}é", "é<topic>é", false),
        ];
        for (text, rendered, literal) in cases {
            let template =
                Template::parse(text, VARS, true).unwrap_or_else(|err| panic!("{text}: {err}"));
            assert_eq!(show(&template), rendered, "{text}");
            assert_eq!(template.is_literal(), literal, "{text}");
        }
    }

    #[test]
    fn rejects_bad_placeholders() {
        let cases = [
            (
                "a$b",
                "`$` at byte 1 starts no placeholder; write `$$` for a literal `$`",
            ),
            ("${topic", "unclosed `${`"),
            (
                "${nope}",
                "unknown placeholder `${nope}`; expected one of: ${topic}, ${partition}, ${header:NAME}",
            ),
            ("${header:}", "`${header:}` names no header"),
        ];
        for (text, error) in cases {
            assert_eq!(
                Template::parse(text, VARS, true),
                Err(error.to_owned()),
                "{text}"
            );
        }
        assert_eq!(
            Template::parse("${header:a}", &["topic"], false),
            Err("unknown placeholder `${header:a}`; expected one of: ${topic}".to_owned())
        );
    }

    #[test]
    fn try_render_stops_at_the_first_error() {
        let template = Template::parse("${header:a}-${header:b}", VARS, true)
            .unwrap_or_else(|e| panic!("{e}"));
        let result = template.try_render(|placeholder, out| match placeholder {
            Placeholder::Header(name) if name == "a" => {
                out.push('A');
                Ok(())
            }
            other => Err(format!("{other:?}")),
        });
        assert_eq!(result, Err("Header(\"b\")".to_owned()));
        assert_eq!(template.placeholders().count(), 2);
    }
}
