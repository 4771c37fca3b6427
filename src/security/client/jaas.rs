//! Java clients' `sasl.jaas.config`, read as Kafka's `JaasConfig` reads it:
//! `<login module> <control flag> (<name>=<value>)* ;`, tokenized the way
//! `java.io.StreamTokenizer` does with Kafka's settings. So a value may be
//! a bare word (`tokenauth=true`, `useKeyTab=true`) or a string in double
//! or single quotes with backslash escapes (`password="a\"b"`), `//` and
//! `/* */` comment out, and a file Java refuses (a number without quotes,
//! a missing `;` or value, two login modules) is refused here too, with
//! Kafka's message, instead of being half read.

/// One login module's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// e.g. `org.apache.kafka.common.security.scram.ScramLoginModule`.
    pub login_module: String,
    /// The options in the order written; a repeated name keeps its last
    /// value, as Kafka's `HashMap` does.
    pub options: Vec<(String, String)>,
}

impl JaasEntry {
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Whether the login module is the one of that simple name (`ScramLoginModule`).
    pub fn is_module(&self, simple_name: &str) -> bool {
        self.login_module.rsplit('.').next() == Some(simple_name)
    }
}

/// The single login module of a client's `sasl.jaas.config` (Kafka's
/// `JaasContext` wants exactly one).
pub fn parse_client_entry(text: &str) -> Result<JaasEntry, String> {
    let mut entries = parse(text)?;
    match entries.len() {
        1 => Ok(entries.remove(0)),
        n => Err(format!("JAAS config property contains {n} login modules, should be 1 module")),
    }
}

/// Every entry of a JAAS configuration value; at least one.
pub fn parse(text: &str) -> Result<Vec<JaasEntry>, String> {
    let mut tokens = Tokenizer::new(text);
    let mut entries = Vec::new();
    loop {
        let login_module = match tokens.next_token() {
            Token::Eof => break,
            token => token.text().ok_or("Login module not specified in JAAS config")?,
        };
        let flag = match tokens.next_token() {
            Token::Eof => return Err("Login module control flag not specified in JAAS config".into()),
            token => token.text(),
        };
        let flag = flag.ok_or("Login module control flag is not available in the JAAS config")?;
        if !["REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"].contains(&flag.to_ascii_uppercase().as_str()) {
            return Err(format!("Invalid login module control flag '{flag}' in JAAS config"));
        }
        let mut options: Vec<(String, String)> = Vec::new();
        loop {
            let key = match tokens.next_token() {
                Token::Eof => return Err("JAAS config entry not terminated by semi-colon".into()),
                Token::Char(';') => break,
                token => token.text().unwrap_or_default(),
            };
            let value = match (tokens.next_token(), tokens.next_token()) {
                (Token::Char('='), value) => value.text(),
                _ => None,
            };
            let value = value.ok_or_else(|| format!("Value not specified for key '{key}' in JAAS config"))?;
            match options.iter_mut().find(|(n, _)| *n == key) {
                Some(option) => option.1 = value,
                None => options.push((key, value)),
            }
        }
        entries.push(JaasEntry { login_module, options });
    }
    if entries.is_empty() {
        return Err("Login module not specified in JAAS config".into());
    }
    Ok(entries)
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    /// StreamTokenizer's TT_NUMBER: it has no text, so it cannot be a value.
    Number,
    /// An ordinary character: `=`, `;`, `{`, ...
    Char(char),
    Eof,
}

impl Token {
    /// StreamTokenizer's `sval`: the text of a word or a quoted string.
    fn text(self) -> Option<String> {
        match self {
            Token::Word(s) | Token::Quoted(s) => Some(s),
            _ => None,
        }
    }
}

/// `java.io.StreamTokenizer` as Kafka's `JaasConfig` sets it up: the
/// default syntax (words of letters and characters from U+00A0 up, numbers,
/// `"` and `'` quotes, `/` a comment to the end of the line, blanks up to
/// U+0020), with `//` and `/* */` comments and `-`, `_` and `$` as word
/// characters.
struct Tokenizer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl<'a> Tokenizer<'a> {
    fn new(text: &'a str) -> Self {
        Tokenizer { chars: text.chars().peekable() }
    }

    fn is_alpha(c: char) -> bool {
        c.is_ascii_alphabetic() || matches!(c, '-' | '_' | '$') || c >= '\u{a0}'
    }

    fn is_digit(c: char) -> bool {
        c.is_ascii_digit() || matches!(c, '.' | '-')
    }

    fn next_token(&mut self) -> Token {
        while let Some(&c) = self.chars.peek() {
            if c > ' ' {
                break;
            }
            self.chars.next();
        }
        let Some(c) = self.chars.next() else { return Token::Eof };
        // Digits come before letters in StreamTokenizer: `-` is both.
        if Self::is_digit(c) {
            if c == '-' && !matches!(self.chars.peek(), Some(d) if d.is_ascii_digit() || *d == '.') {
                return Token::Char('-');
            }
            let mut seen_dot = c == '.';
            while let Some(&d) = self.chars.peek() {
                if d.is_ascii_digit() || (d == '.' && !seen_dot) {
                    seen_dot |= d == '.';
                    self.chars.next();
                } else {
                    break;
                }
            }
            return Token::Number;
        }
        if Self::is_alpha(c) {
            let mut word = String::from(c);
            while let Some(&d) = self.chars.peek() {
                if !(Self::is_alpha(d) || Self::is_digit(d)) {
                    break;
                }
                word.push(d);
                self.chars.next();
            }
            return Token::Word(word);
        }
        if c == '"' || c == '\'' {
            return Token::Quoted(self.quoted(c));
        }
        if c == '/' {
            match self.chars.peek() {
                Some('*') => {
                    self.chars.next();
                    let mut last = '\0';
                    for d in self.chars.by_ref() {
                        if last == '*' && d == '/' {
                            break;
                        }
                        last = d;
                    }
                }
                // `//`, or `/` alone: both comment out the rest of the line.
                _ => {
                    for d in self.chars.by_ref() {
                        if d == '\n' || d == '\r' {
                            break;
                        }
                    }
                }
            }
            return self.next_token();
        }
        Token::Char(c)
    }

    /// A quoted string after its opening `quote`: it ends at the same
    /// quote, a line end or the end of the text; `\n`, `\t`, ... and octal
    /// `\0`–`\377` are escapes, and a backslash before any other character
    /// stands for that character.
    fn quoted(&mut self, quote: char) -> String {
        let mut out = String::new();
        while let Some(d) = self.chars.next() {
            if d == quote || d == '\n' || d == '\r' {
                break;
            }
            if d != '\\' {
                out.push(d);
                continue;
            }
            let Some(e) = self.chars.next() else { break };
            let escaped = match e {
                'a' => '\u{7}',
                'b' => '\u{8}',
                'f' => '\u{c}',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'v' => '\u{b}',
                '0'..='7' => {
                    let mut code = e as u32 - '0' as u32;
                    let digits = if e <= '3' { 2 } else { 1 };
                    for _ in 0..digits {
                        match self.chars.peek() {
                            Some(&o @ '0'..='7') => {
                                code = code * 8 + (o as u32 - '0' as u32);
                                self.chars.next();
                            }
                            _ => break,
                        }
                    }
                    char::from_u32(code).unwrap_or('\u{fffd}')
                }
                other => other,
            };
            out.push(escaped);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(text: &str) -> Vec<(String, String)> {
        parse_client_entry(text).unwrap().options
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn values_are_quoted_strings_or_bare_words_as_java_reads_them() {
        let entry = parse_client_entry(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"t0k3n\" \
             password='h\\\"m\\141c' tokenauth=true;",
        )
        .unwrap();
        assert!(entry.is_module("ScramLoginModule"));
        assert_eq!(entry.option("username"), Some("t0k3n"));
        assert_eq!(entry.option("password"), Some("h\"mac"));
        assert_eq!(entry.option("tokenauth"), Some("true"));
        // Kafka's own cases (JaasContextTest): quoted values and names.
        assert_eq!(
            options("test.M required propName=\"prop value\" propName2=\"value1 = 1, value2 = 2\";"),
            pairs(&[("propName", "prop value"), ("propName2", "value1 = 1, value2 = 2")])
        );
        assert_eq!(options("test.M required \"prop name\"=propValue;"), pairs(&[("prop name", "propValue")]));
        assert_eq!(options("test.M OPTIONAL option1=\"3\";"), pairs(&[("option1", "3")]));
        assert_eq!(options("test.M sufficient;"), vec![]);
        assert_eq!(options("test.M required a=x b=y a=z;"), pairs(&[("a", "z"), ("b", "y")]));
        // Comments, and words with digits, dots and dashes after a letter.
        assert_eq!(
            options("a.B required /* old: user=x */ user=svc-1.a // trailing\n pass=\"p/w\";"),
            pairs(&[("user", "svc-1.a"), ("pass", "p/w")])
        );
    }

    #[test]
    fn configurations_java_refuses_are_refused_with_kafkas_message() {
        for (text, message) in [
            ("  required option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
            ("test.loginModule option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
            ("loginModule required option1;", "Value not specified for key 'option1' in JAAS config"),
            ("test.M required option1=value1", "JAAS config entry not terminated by semi-colon"),
            ("test.M required option1=3;", "Value not specified for key 'option1' in JAAS config"),
            ("test.M { option1=3;", "Login module control flag is not available in the JAAS config"),
            ("test.M", "Login module control flag not specified in JAAS config"),
            ("", "Login module not specified in JAAS config"),
            ("a.M required; b.M required;", "JAAS config property contains 2 login modules, should be 1 module"),
        ] {
            assert_eq!(parse_client_entry(text).unwrap_err(), message, "{text}");
        }
    }

    #[test]
    fn a_quote_left_open_ends_at_the_line_or_the_text() {
        assert_eq!(parse_client_entry("m.M required a=\"x\n;").unwrap().option("a"), Some("x"));
        assert!(parse_client_entry("m.M required a=\"x;").is_err());
    }
}
