//! `trueno`: what this machine can run, and how fast each ISA runs every operation.

use clap::{Parser, Subcommand};

mod bench;
mod info;
mod progress;

#[derive(Parser)]
#[command(
    name = "trueno",
    version,
    about = "trueno: compute primitives on every CPU ISA"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// CPU model, detected features, and the backend chosen for each operation class.
    Info {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Times every operation at 1K, 10K, 100K and 1M elements on scalar and on every ISA
    /// this CPU has, with throughput and speedup over scalar.
    Bench {
        /// Fewer repetitions (about 15 seconds in all).
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Only these operations (comma-separated names; default all).
        #[arg(long, value_delimiter = ',')]
        ops: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { json } => info::run(json),
        Command::Bench { quick, json, ops } => bench::run(bench::Options { quick, json, ops }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trueno: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
