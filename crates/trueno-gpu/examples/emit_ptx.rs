//! Prints the PTX of one kernel: `cargo run -p trueno-gpu --example emit_ptx -- trueno_gelu_f32 sm_90`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "trueno_add_f32".into());
    let target = args
        .next()
        .and_then(|t| trueno_gpu::ptx::Target::parse(&t))
        .unwrap_or(trueno_gpu::ptx::Target::Sm90);
    print!("{}", trueno_gpu::kernels::find(&name)?.emit_ptx(target)?);
    Ok(())
}
