//! Parsing a `{{path}}` into its root, segments and filters, once, when the rules load.

use super::*;

pub(super) struct Parser<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl Parser<'_> {
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    pub(super) fn error(&self, what: &str) -> SyntaxError {
        SyntaxError(format!(
            "{what} at position {} in path `{}`",
            self.pos + 1,
            self.text
        ))
    }

    fn ident(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
        if start == self.pos {
            return Err(self.error("expected a name"));
        }
        Ok(self.text[start..self.pos].to_owned())
    }

    fn quoted(&mut self) -> Result<String, SyntaxError> {
        if !self.eat('"') {
            return Err(self.error("expected `\"`"));
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == '"' {
                let text = self.text[start..self.pos].to_owned();
                self.pos += 1;
                return Ok(text);
            }
            self.pos += c.len_utf8();
        }
        Err(self.error("unterminated quoted text"))
    }

    /// A path ends at the end of the text, at `]` (inside a selector) or at `|` (filters).
    pub(super) fn path(&mut self) -> Result<Path, SyntaxError> {
        let start = self.pos;
        let name = self.ident()?;
        let root = Root::parse(&name).ok_or_else(|| {
            SyntaxError(format!(
                "unknown template root `{name}` in `{}` (expected match, trigger, context, result, item or error)",
                self.text
            ))
        })?;
        let mut segments = Vec::new();
        loop {
            if self.eat('.') {
                segments.push(Segment::Key(self.ident()?));
            } else if self.eat('[') {
                segments.push(self.selector()?);
                if !self.eat(']') {
                    return Err(self.error("expected `]`"));
                }
            } else {
                break;
            }
        }
        let mut filters = Vec::new();
        while self.eat('|') {
            let name = self.ident()?;
            filters.push(match name.as_str() {
                "number" => Filter::Number,
                "count" => Filter::Count,
                "json" => Filter::Json,
                "uuid" => Filter::Uuid,
                "default" => {
                    if !self.eat(':') {
                        return Err(self.error("expected `:\"text\"` after `default`"));
                    }
                    Filter::Default(self.quoted()?)
                }
                other => {
                    return Err(SyntaxError(format!(
                        "unknown filter `{other}` in `{}` (expected number, count, json, default or uuid)",
                        self.text
                    )));
                }
            });
        }
        Ok(Path {
            source: self.text[start..self.pos].to_owned(),
            root,
            segments,
            filters,
        })
    }

    fn selector(&mut self) -> Result<Segment, SyntaxError> {
        if self.eat('*') {
            return Ok(Segment::Each);
        }
        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            let name = self.ident()?;
            return name
                .parse()
                .map(Segment::Index)
                .map_err(|_| self.error("expected an index"));
        }
        let mut field = vec![self.ident()?];
        while self.eat('.') {
            field.push(self.ident()?);
        }
        let compare = if self.eat('=') {
            Compare::Equals
        } else if self.eat('~') {
            Compare::Contains
        } else {
            return Err(self.error("expected `=` or `~` in a selector"));
        };
        let operand = if self.peek() == Some('"') {
            Operand::Literal(self.quoted()?)
        } else {
            Operand::Path(Box::new(self.path()?))
        };
        Ok(Segment::Select {
            field,
            compare,
            operand,
        })
    }
}
