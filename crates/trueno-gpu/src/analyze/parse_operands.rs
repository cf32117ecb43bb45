//! Instructions and their operands: guards, opcodes, registers, immediates, vectors,
//! addresses (`[base+off]`), and PTX's integer literal forms.

use super::{Parser, Result};
use crate::analyze::ast::*;
use crate::analyze::lex::Kind;

impl<'a> Parser<'a, '_> {
    pub(super) fn instruction(&mut self) -> Result<Instruction> {
        let at = self.here();
        let guard = if self.eat('@') {
            let negated = self.eat('!');
            Some(Guard {
                reg: self.word()?.to_string(),
                negated,
            })
        } else {
            None
        };
        let mut opcode = self.word()?.to_string();
        // Qualifiers joined by `::` (`.shared::cta`, `.mbarrier::complete_tx::bytes`).
        while self.peek().is_some_and(|p| p.is(':')) && self.peek_at(1).is_some_and(|p| p.is(':')) {
            self.i += 2;
            opcode.push_str("::");
            opcode.push_str(self.word()?);
        }
        let mut operands = Vec::new();
        if !self.eat(';') {
            loop {
                operands.push(self.operand()?);
                if self.eat(';') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.error_here("expected `,` or `;` after an operand"));
                }
            }
        }
        Ok(Instruction::new(guard, opcode, operands, at))
    }

    fn operand(&mut self) -> Result<Operand> {
        let t = self.next()?;
        let op = match t.kind {
            Kind::Number => literal(t.text, false),
            Kind::Word if t.text == "_" => Operand::Sink,
            Kind::Word => {
                let mut name = t.text.to_string();
                if self.peek().is_some_and(|p| p.is('(')) && t.text == "generic" {
                    self.i += 1;
                    name = self.word()?.to_string();
                    self.expect(')')?;
                }
                // `sym+8` outside brackets (a symbol's address plus an offset).
                if self.peek().is_some_and(|p| p.is('+'))
                    && self.peek_at(1).is_some_and(|n| n.kind == Kind::Number)
                {
                    self.i += 2;
                }
                Operand::Name(name)
            }
            Kind::Punct if t.is('-') => match self.next()? {
                n if n.kind == Kind::Number => literal(n.text, true),
                _ => {
                    self.i -= 1;
                    return Err(self.error_here("expected a number after `-`"));
                }
            },
            Kind::Punct if t.is('!') => Operand::Not(Box::new(self.operand()?)),
            Kind::Punct if t.is('[') => self.address()?,
            Kind::Punct if t.is('{') => Operand::Vector(self.list('}')?),
            Kind::Punct if t.is('(') => Operand::List(self.list(')')?),
            _ => {
                self.i -= 1;
                return Err(self.error_here("expected an operand"));
            }
        };
        if self.eat('|') {
            return Ok(Operand::Pair(Box::new(op), Box::new(self.operand()?)));
        }
        Ok(op)
    }

    fn list(&mut self, close: char) -> Result<Vec<Operand>> {
        let mut v = Vec::new();
        if self.eat(close) {
            return Ok(v);
        }
        loop {
            v.push(self.operand()?);
            if self.eat(close) {
                return Ok(v);
            }
            if !self.eat(',') {
                return Err(self.error_here(&format!("expected `,` or `{close}`")));
            }
        }
    }

    /// After `[`: `base`, `base+off`, `base+-off`, `base-off`, `off`; texture forms
    /// (`[tex, {..}]`) keep their first name.
    fn address(&mut self) -> Result<Operand> {
        let (mut base, mut offset, mut sign) = (None, 0i64, 1i64);
        loop {
            let t = self.next()?;
            match t.kind {
                _ if t.is(']') => return Ok(Operand::Address { base, offset }),
                Kind::Word => {
                    if base.is_none() {
                        base = Some(t.text.to_string());
                    }
                }
                Kind::Number => {
                    offset = offset.wrapping_add(sign.wrapping_mul(parse_int(t.text).unwrap_or(0)));
                    sign = 1;
                }
                Kind::Punct if t.is('-') => sign = -sign,
                Kind::Punct if t.is('+') => {}
                Kind::Punct if t.is(',') => {}
                Kind::Punct if t.is('{') => {
                    self.i -= 1;
                    self.skip_block()?;
                }
                _ => {
                    self.i -= 1;
                    return Err(self.error_here("expected `]`"));
                }
            }
        }
    }
}

fn literal(text: &str, negative: bool) -> Operand {
    match parse_int(text) {
        Some(v) if negative => Operand::Int(v.wrapping_neg()),
        Some(v) => Operand::Int(v),
        None => Operand::Float,
    }
}

/// Integer literal: decimal, `0x` hex, `0b` binary, leading-zero octal, optional `U`.
pub fn parse_int(text: &str) -> Option<i64> {
    let t = text.strip_suffix(['U', 'u']).unwrap_or(text);
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        (b, 2)
    } else if t.len() > 1 && t.starts_with('0') && t.bytes().all(|b| b.is_ascii_digit()) {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    u64::from_str_radix(digits, radix).ok().map(|v| v as i64)
}
