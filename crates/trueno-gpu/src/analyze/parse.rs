//! PTX text to [`Module`]: module directives, variables, `.entry`/`.func` with their
//! parameters, performance directives, register declarations and statements. Lenient where
//! ptxas is (unknown directives and opcodes are kept or skipped), exact about structure:
//! a missing `;`, `}` or `]` is an error at its line and column.

use super::ast::*;
use super::lex::{Kind, Token, tokenize};

/// Why a file did not parse, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Where the parser stopped.
    pub pos: Pos,
    /// What it expected or found.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.pos.line, self.pos.col, self.message)
    }
}

impl std::error::Error for ParseError {}

type Result<T> = std::result::Result<T, ParseError>;

/// Parses a PTX module.
///
/// ```
/// use trueno_gpu::analyze::parse;
///
/// let m = parse(".version 8.0\n.target sm_90\n.address_size 64\n\
///     .visible .entry k(.param .u64 x) { .reg .b32 %r<2>; mov.u32 %r0, %tid.x; ret; }")?;
/// assert_eq!(m.functions[0].name, "k");
/// assert_eq!(m.functions[0].body.len(), 2);
/// # Ok::<(), trueno_gpu::analyze::ParseError>(())
/// ```
pub fn parse(src: &str) -> Result<Module> {
    let tokens = tokenize(src);
    let mut p = Parser {
        t: &tokens,
        i: 0,
        end: end_pos(src),
    };
    p.module()
}

fn end_pos(src: &str) -> Pos {
    let line = src.lines().count().max(1) as u32;
    let col = src.lines().last().map_or(0, |l| l.chars().count()) as u32 + 1;
    Pos { line, col }
}

struct Parser<'a, 't> {
    t: &'t [Token<'a>],
    i: usize,
    end: Pos,
}

fn pos(t: &Token) -> Pos {
    Pos {
        line: t.line,
        col: t.col,
    }
}

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<Token<'a>> {
        self.t.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<Token<'a>> {
        self.t.get(self.i + k).copied()
    }

    fn next(&mut self) -> Result<Token<'a>> {
        let t = self
            .peek()
            .ok_or_else(|| self.error_here("unexpected end of file"))?;
        self.i += 1;
        Ok(t)
    }

    fn here(&self) -> Pos {
        self.peek().map_or(self.end, |t| pos(&t))
    }

    fn error_here(&self, message: &str) -> ParseError {
        let found = self
            .peek()
            .map_or("end of file".to_string(), |t| format!("`{}`", t.text));
        ParseError {
            pos: self.here(),
            message: format!("{message} (found {found})"),
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek().is_some_and(|t| t.is(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error_here(&format!("expected `{c}`")))
        }
    }

    fn word(&mut self) -> Result<&'a str> {
        match self.peek() {
            Some(t) if t.kind == Kind::Word => {
                self.i += 1;
                Ok(t.text)
            }
            _ => Err(self.error_here("expected a name")),
        }
    }

    fn number(&mut self) -> Result<i64> {
        match self.peek() {
            Some(t) if t.kind == Kind::Number => match parse_int(t.text) {
                Some(v) => {
                    self.i += 1;
                    Ok(v)
                }
                None => Err(self.error_here("expected an integer")),
            },
            _ => Err(self.error_here("expected an integer")),
        }
    }

    /// Skips the rest of a line-terminated directive (`.loc`, `.file`, `.target`).
    fn skip_line(&mut self, line: u32) {
        while self.peek().is_some_and(|t| t.line == line && !t.is('}')) {
            self.i += 1;
        }
        self.eat(';');
    }

    /// Skips to the `;` that ends a statement, over balanced braces (initializers).
    fn skip_statement(&mut self) -> Result<()> {
        let mut depth = 0usize;
        loop {
            let t = self.next()?;
            if t.is('{') {
                depth += 1;
            } else if t.is('}') {
                depth = depth.saturating_sub(1);
            } else if t.is(';') && depth == 0 {
                return Ok(());
            }
        }
    }

    /// Skips a `{ ... }` block (the parser is on `{`).
    fn skip_block(&mut self) -> Result<()> {
        self.expect('{')?;
        let mut depth = 1usize;
        while depth > 0 {
            let t = self.next()?;
            if t.is('{') {
                depth += 1;
            } else if t.is('}') {
                depth -= 1;
            }
        }
        Ok(())
    }

    fn module(&mut self) -> Result<Module> {
        let mut m = Module {
            address_size: 64,
            ..Module::default()
        };
        while let Some(t) = self.peek() {
            match t.text {
                ";" => self.i += 1,
                ".version" => {
                    self.i += 1;
                    let v = self.next()?;
                    m.version = Some(v.text.to_string());
                }
                ".target" => {
                    self.i += 1;
                    while let Some(w) = self.peek().filter(|w| w.line == t.line) {
                        self.i += 1;
                        if w.kind == Kind::Word {
                            m.target.push(w.text.to_string());
                        }
                    }
                }
                ".address_size" => {
                    self.i += 1;
                    m.address_size = self.number()? as u32;
                }
                ".file" | ".loc" => {
                    self.i += 1;
                    self.skip_line(t.line);
                }
                ".section" => {
                    self.i += 1;
                    while self.peek().is_some_and(|t| !t.is('{')) {
                        self.i += 1;
                    }
                    self.skip_block()?;
                }
                _ if t.kind == Kind::Word && t.text.starts_with('.') => self.module_item(&mut m)?,
                _ => return Err(self.error_here("expected a directive at module scope")),
            }
        }
        Ok(m)
    }

    /// A function or variable, after optional linkage (`.visible`, `.extern`, `.weak`).
    fn module_item(&mut self, m: &mut Module) -> Result<()> {
        let start = self.i;
        while let Some(t) = self.peek() {
            match t.text {
                ".visible" | ".extern" | ".weak" | ".common" => self.i += 1,
                ".entry" | ".func" => return self.function(m, t.text == ".entry"),
                _ => break,
            }
        }
        let next = self.peek().map(|t| t.text);
        if next.and_then(Space::from_part).is_some() {
            let vars = self.var_decl()?;
            m.globals.extend(vars);
            return Ok(());
        }
        // `.alias`, `.pragma` and directives ptxas knows and we do not: skipped whole.
        self.i = start.max(self.i);
        self.i += 1;
        self.skip_statement()
    }

    fn function(&mut self, m: &mut Module, is_entry: bool) -> Result<()> {
        let at = self.next()?;
        let mut f = Function {
            is_entry,
            pos: pos(&at),
            ..Function::default()
        };
        if self.peek().is_some_and(|t| t.is('(')) {
            self.params()?; // a .func's return values
        }
        f.name = self.word()?.to_string();
        if self.peek().is_some_and(|t| t.is('(')) {
            f.params = self.params()?;
        }
        // Performance directives, up to the body (or `;` for a prototype).
        loop {
            let t = self
                .peek()
                .ok_or_else(|| self.error_here("expected a function body"))?;
            if t.is('{') {
                break;
            }
            if t.is(';') {
                self.i += 1;
                return Ok(()); // a declaration: nothing to analyze
            }
            self.i += 1;
            let mut numbers = Vec::new();
            while self
                .peek()
                .is_some_and(|n| n.kind == Kind::Number || n.is(','))
            {
                let n = self.next()?;
                if n.kind == Kind::Number {
                    numbers.push(parse_int(n.text).unwrap_or(0).clamp(0, u32::MAX as i64) as u32);
                }
            }
            match t.text {
                ".maxntid" | ".reqntid" if !numbers.is_empty() => {
                    f.max_threads = Some(numbers.iter().fold(1u32, |a, &b| a.saturating_mul(b)));
                    if t.text == ".reqntid" {
                        f.required_width = numbers.first().copied();
                    }
                }
                ".minnctapersm" => f.min_blocks_per_sm = numbers.first().copied(),
                ".maxnreg" => f.max_registers = numbers.first().copied(),
                ".pragma" => {
                    self.eat(',');
                    while self
                        .peek()
                        .is_some_and(|t| t.kind == Kind::Str || t.is(','))
                    {
                        self.i += 1;
                    }
                    self.eat(';');
                }
                _ => {}
            }
        }
        self.body(&mut f)?;
        m.functions.push(f);
        Ok(())
    }

    /// `( .param .u64 a, .param .align 4 .b8 b[16], ... )`.
    fn params(&mut self) -> Result<Vec<ParamDecl>> {
        self.expect('(')?;
        let mut out = Vec::new();
        if self.eat(')') {
            return Ok(out);
        }
        loop {
            let (mut ty, mut name, mut count) = (String::new(), String::new(), 1u64);
            loop {
                let t = self.next()?;
                if t.is(',') || t.is(')') {
                    if name.is_empty() {
                        return Err(ParseError {
                            pos: pos(&t),
                            message: "parameter without a name".into(),
                        });
                    }
                    out.push(ParamDecl {
                        bytes: type_bytes(&ty).unwrap_or(0) * count,
                        ty: std::mem::take(&mut ty),
                        name: std::mem::take(&mut name),
                    });
                    if t.is(')') {
                        return Ok(out);
                    }
                    break;
                }
                match t.kind {
                    Kind::Word if t.text.starts_with('.') && type_bytes(t.text).is_some() => {
                        ty = t.text[1..].to_string();
                    }
                    Kind::Word if t.text.starts_with('.') => {} // .ptr, .align, spaces
                    Kind::Word => name = t.text.to_string(),
                    Kind::Punct if t.is('[') => {
                        count = if self.peek().is_some_and(|t| t.is(']')) {
                            0
                        } else {
                            self.number()?.max(0) as u64
                        };
                        self.expect(']')?;
                    }
                    Kind::Punct if t.is('<') => {
                        self.number()?;
                        self.expect('>')?;
                    }
                    _ => {} // `.align 8`'s number
                }
            }
        }
    }

    /// `.shared .align 16 .b8 a[64], b;` (the parser is on the space).
    fn var_decl(&mut self) -> Result<Vec<VarDecl>> {
        let at = self.here();
        let mut space = None;
        let mut ty = String::new();
        let mut vector = 1u64;
        while let Some(t) = self
            .peek()
            .filter(|t| t.kind == Kind::Word && t.text.starts_with('.'))
        {
            self.i += 1;
            if let Some(s) = Space::from_part(t.text) {
                space.get_or_insert(s);
            } else if t.text == ".align" {
                self.number()?;
            } else if let Some(v) = t.text.strip_prefix(".v").and_then(|v| v.parse().ok()) {
                vector = v;
            } else if type_bytes(t.text).is_some() {
                ty = t.text[1..].to_string();
            }
        }
        let space = space.ok_or_else(|| self.error_here("expected a state space"))?;
        let mut out = Vec::new();
        loop {
            let name_pos = self.here();
            let name = self.word()?.to_string();
            let mut count = 1u64;
            if self.eat('<') {
                count = self.number()?.max(0) as u64;
                self.expect('>')?;
            }
            while self.eat('[') {
                if self.eat(']') {
                    count = 0;
                    continue;
                }
                count = count.saturating_mul(self.number()?.max(0) as u64);
                self.expect(']')?;
            }
            out.push(VarDecl {
                space,
                ty: ty.clone(),
                name,
                bytes: type_bytes(&ty)
                    .unwrap_or(0)
                    .saturating_mul(vector)
                    .saturating_mul(count),
                pos: if out.is_empty() { at } else { name_pos },
            });
            if self.eat('=') {
                self.skip_statement()?;
                return Ok(out);
            }
            if self.eat(';') {
                return Ok(out);
            }
            if !self.eat(',') {
                return Err(self.error_here("expected `;` after a declaration"));
            }
        }
    }

    /// `.reg .b32 %r<6>, %x;` (the parser is after `.reg`).
    fn reg_decl(&mut self, f: &mut Function) -> Result<()> {
        let (mut ty, mut vector) = (String::new(), 1u32);
        while let Some(t) = self
            .peek()
            .filter(|t| t.kind == Kind::Word && t.text.starts_with('.'))
        {
            self.i += 1;
            if let Some(v) = t.text.strip_prefix(".v").and_then(|v| v.parse().ok()) {
                vector = v;
            } else if t.text == ".align" {
                self.number()?;
            } else {
                ty = t.text[1..].to_string();
            }
        }
        loop {
            let at = self.here();
            let name = self.word()?.to_string();
            let range = if self.eat('<') {
                let n = self.number()?;
                self.expect('>')?;
                Some(n.clamp(0, 1 << 24) as u32)
            } else {
                None
            };
            f.regs.push(RegDecl {
                ty: ty.clone(),
                vector,
                name,
                range,
                pos: at,
            });
            if self.eat(';') {
                return Ok(());
            }
            if !self.eat(',') {
                return Err(self.error_here("expected `;` after a register declaration"));
            }
        }
    }

    fn body(&mut self, f: &mut Function) -> Result<()> {
        self.expect('{')?;
        let mut depth = 1usize;
        loop {
            let t = self
                .peek()
                .ok_or_else(|| self.error_here("missing `}` at the end of the function"))?;
            if t.is('{') {
                self.i += 1;
                depth += 1;
            } else if t.is('}') {
                self.i += 1;
                depth -= 1;
                if depth == 0 {
                    f.end_line = t.line;
                    return Ok(());
                }
            } else if t.is(';') {
                self.i += 1;
            } else if t.kind == Kind::Word && t.text.starts_with('.') {
                self.i += 1;
                match t.text {
                    ".reg" => self.reg_decl(f)?,
                    ".loc" | ".file" => self.skip_line(t.line),
                    _ if Space::from_part(t.text).is_some() => {
                        self.i -= 1;
                        let vars = self.var_decl()?;
                        f.vars.extend(vars);
                    }
                    _ => self.skip_statement()?,
                }
            } else if t.kind == Kind::Word
                && self.peek_at(1).is_some_and(|c| c.is(':'))
                && !self.peek_at(2).is_some_and(|c| c.is(':'))
            {
                self.i += 2;
                f.body.push(Stmt::Label(t.text.to_string(), pos(&t)));
            } else {
                let ins = self.instruction()?;
                f.body.push(Stmt::Instr(ins));
            }
        }
    }
}

#[path = "parse_operands.rs"]
mod operands;
pub use operands::parse_int;

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
