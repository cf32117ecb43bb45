//! `trueno`: what this machine can run, how fast each ISA runs every operation, the PTX
//! kernels, and GGUF files.

use clap::{Parser, Subcommand};

mod bench;
mod crossover;
mod gguf;
mod info;
mod progress;
mod ptx;
mod ptx_analyze;
mod ptx_map;

#[derive(Parser)]
#[command(
    name = "trueno",
    version,
    about = "trueno: compute primitives on every CPU ISA and on NVIDIA GPUs"
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
    /// this CPU has, with throughput and speedup over scalar; GEMM (`gemm`) in GFLOP/s and
    /// % of the FMA peak; and where the GPU (wgpu) starts beating the CPU (`crossover`).
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
    /// The GPU kernels trueno writes as PTX.
    Ptx {
        #[command(subcommand)]
        command: PtxCommand,
    },
    /// GGUF model files.
    Gguf {
        #[command(subcommand)]
        command: GgufCommand,
    },
}

#[derive(Subcommand)]
enum GgufCommand {
    /// Metadata, tensor table (name, type, shape, bytes, offset) and totals by type.
    Inspect {
        /// The .gguf file.
        file: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum PtxCommand {
    /// Every kernel configuration: module, parameters, size, registers.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Prints a kernel's PTX.
    Emit {
        /// Kernel name, as `trueno ptx list` shows it.
        kernel: String,
        /// sm_80, sm_90 or sm_90a.
        #[arg(long, default_value = "sm_90")]
        target: String,
    },
    /// Analyzes a PTX file (trueno's, nvcc's, Triton's): registers and occupancy,
    /// instruction mix, memory coalescing and bank conflicts, roofline class, and bugs.
    /// Exits with status 2 when a finding is critical.
    Analyze(ptx_analyze::Options),
    /// For a llama/qwen2-style GGUF model: the kernels trueno-gpu launches per layer for a
    /// decode step (or a prefill), their launch configurations, bytes, FLOPs and the
    /// roofline time on a named device, and the launches per token.
    Map(ptx_map::Options),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Info { json } => info::run(json),
        Command::Bench { quick, json, ops } => bench::run(bench::Options { quick, json, ops }),
        Command::Ptx {
            command: PtxCommand::List { json },
        } => ptx::list(json),
        Command::Ptx {
            command: PtxCommand::Emit { kernel, target },
        } => ptx::emit(&kernel, &target),
        Command::Ptx {
            command: PtxCommand::Analyze(options),
        } => match ptx_analyze::run(&options) {
            Ok(true) => return std::process::ExitCode::from(2),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        },
        Command::Ptx {
            command: PtxCommand::Map(options),
        } => ptx_map::run(&options),
        Command::Gguf {
            command: GgufCommand::Inspect { file, json },
        } => gguf::inspect(&file, json),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // A closed pipe (`trueno ptx list | head`) is not a failure.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("trueno: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
