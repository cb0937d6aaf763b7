//! `kore-bench` with the system allocator: the runtime, CRD, operators and API server suites,
//! which compare kore with its peers on the same neutral allocator. See `kore_bench::main`.

fn main() -> anyhow::Result<()> {
    kore_bench::main(kore_bench::Allocator::System)
}
