//! PTX tokens with their line and column. Comments are dropped; everything else, including
//! characters PTX has no use for, becomes a token so the parser can say where it stopped.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A word: directive (`.reg`), opcode (`ld.global.v4.f32`), register (`%r1`,
    /// `%tid.x`), label or symbol (`$L__BB0_2`, `_Z6kernelPf`).
    Word,
    /// A number: decimal, hex (`0x1F`), or a float (`1.5`, `0f3F800000`, `0d3FF0...`).
    Number,
    /// A quoted string (`.file 1 "a.cu"`).
    Str,
    /// One punctuation character: `, ; : { } [ ] ( ) + - | ! @ = < >`, or anything else.
    Punct,
}

/// One token: `text` is a slice of the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    /// Its class.
    pub kind: Kind,
    /// The source text.
    pub text: &'a str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
}

impl Token<'_> {
    /// Whether this is the punctuation `c`.
    pub fn is(&self, c: char) -> bool {
        self.kind == Kind::Punct && self.text.len() == c.len_utf8() && self.text.starts_with(c)
    }
}

fn word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '%' | '.')
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%' | '.')
}

/// Splits `src` into tokens. Never fails: an unterminated comment or string ends at the end
/// of the input, and stray characters are single `Punct` tokens.
pub fn tokenize(src: &str) -> Vec<Token<'_>> {
    let mut out = Vec::with_capacity(src.len() / 4);
    let bytes = src.as_bytes();
    let (mut i, mut line, mut line_start) = (0usize, 1u32, 0usize);
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                i += 1;
                line += 1;
                line_start = i;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    if bytes[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                    }
                    i += 1;
                }
                i = (i + 2).min(bytes.len());
            }
            _ => {
                let start = i;
                let col = src[line_start..start].chars().count() as u32 + 1;
                let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
                let kind = if ch == '"' {
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                        i += 1;
                    }
                    i = (i + 1).min(bytes.len());
                    Kind::Str
                } else if ch.is_ascii_digit() {
                    i += 1;
                    while i < bytes.len() {
                        let d = bytes[i];
                        let exp_sign = matches!(d, b'+' | b'-')
                            && matches!(bytes[i - 1], b'e' | b'E')
                            && !src[start..i].starts_with("0x")
                            && !src[start..i].starts_with("0X")
                            && !matches!(bytes.get(start + 1), Some(b'f' | b'F' | b'd' | b'D'));
                        if d.is_ascii_alphanumeric() || d == b'.' || d == b'_' || exp_sign {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    Kind::Number
                } else if word_start(ch) {
                    i += 1;
                    while i < bytes.len() && word_char(bytes[i] as char) {
                        i += 1;
                    }
                    Kind::Word
                } else {
                    i += ch.len_utf8();
                    Kind::Punct
                };
                out.push(Token {
                    kind,
                    text: &src[start..i],
                    line,
                    col,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Kind, &str)> {
        tokenize(src)
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn words_numbers_and_punctuation() {
        assert_eq!(
            kinds("@!%p1 ld.global.v4.f32 {%f1, %f2}, [%rd1+-16]; // tail"),
            vec![
                (Kind::Punct, "@"),
                (Kind::Punct, "!"),
                (Kind::Word, "%p1"),
                (Kind::Word, "ld.global.v4.f32"),
                (Kind::Punct, "{"),
                (Kind::Word, "%f1"),
                (Kind::Punct, ","),
                (Kind::Word, "%f2"),
                (Kind::Punct, "}"),
                (Kind::Punct, ","),
                (Kind::Punct, "["),
                (Kind::Word, "%rd1"),
                (Kind::Punct, "+"),
                (Kind::Punct, "-"),
                (Kind::Number, "16"),
                (Kind::Punct, "]"),
                (Kind::Punct, ";"),
            ]
        );
    }

    #[test]
    fn float_forms_stay_one_number() {
        let t = kinds("0f3F800000 0d3FF0000000000000 1.5e-3 0x1F 8.5 1E+2");
        assert!(t.iter().all(|(k, _)| *k == Kind::Number), "{t:?}");
        assert_eq!(t.len(), 6);
        // A hex float's digits are not an exponent: `0f3E-1` is two numbers around `-`.
        assert_eq!(kinds("0f3E-1").len(), 3);
    }

    #[test]
    fn lines_and_columns_count_comments_and_unicode() {
        let t = tokenize("/* a\n b */ x\n  é y");
        assert_eq!((t[0].text, t[0].line, t[0].col), ("x", 2, 7));
        assert_eq!((t[1].text, t[1].line, t[1].col), ("é", 3, 3));
        assert_eq!((t[2].text, t[2].line, t[2].col), ("y", 3, 5));
    }

    #[test]
    fn unterminated_comment_and_string_end_at_eof() {
        assert!(tokenize("x /* never closed").len() == 1);
        assert_eq!(kinds("\"open")[0].0, Kind::Str);
    }
}
