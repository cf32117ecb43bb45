//! A one-line progress bar on stderr, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Write};

pub struct Progress {
    total: usize,
    done: usize,
    enabled: bool,
}

impl Progress {
    pub fn new(total: usize) -> Self {
        Progress {
            total,
            done: 0,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Advances by one and redraws with `label`.
    pub fn step(&mut self, label: &str) {
        self.done += 1;
        if !self.enabled {
            return;
        }
        const WIDTH: usize = 30;
        let filled = WIDTH * self.done / self.total.max(1);
        let bar: String = "#".repeat(filled) + &".".repeat(WIDTH - filled);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r[{bar}] {}/{} {label:<32}", self.done, self.total);
        let _ = err.flush();
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r{:80}\r", "");
        }
    }
}
