//! `kore-bench` with `kore`'s global allocator (mimalloc): the workloads suite, whose API
//! server and simulated nodes run in the benchmark's process and stand for `kore up`.
//! `kore-bench --suite workloads` hands over to this binary. See `kore_bench::main`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    kore_bench::main(kore_bench::Allocator::Mimalloc)
}
