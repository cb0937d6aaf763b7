//! The AFL++ harness: `kore-fuzz <target>` runs AFL++'s inputs through one target, in
//! persistent mode. `kore-fuzz --list` prints the targets CI runs; `--list-all` all of them.
//! Built by `cargo afl build --features afl`; `fuzz/run` drives it.

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    if arg == "--list" || arg == "--list-all" {
        for t in kore_fuzz::TARGETS {
            if arg == "--list-all" || t.pending.is_none() {
                println!("{}", t.name);
            }
        }
        return;
    }
    let Some(target) = kore_fuzz::target(&arg) else {
        eprintln!("usage: kore-fuzz <target> | --list | --list-all");
        for t in kore_fuzz::TARGETS {
            eprintln!("  {:16} {}", t.name, t.about);
        }
        std::process::exit(2);
    };
    let run = target.run;
    // The server handles requests on tokio worker threads, whose stacks are 2 MiB: fuzz on such
    // a stack too, so that recursion that would overflow in the server overflows here (the
    // main thread's 8 MiB would hide it). A harness built at opt-level 0 (CI's quick build)
    // needs several times the stack for the same depth, in dependencies no real build leaves
    // unoptimized, so `fuzz/run` gives it a larger one through KORE_FUZZ_STACK_MIB.
    let stack = match std::env::var("KORE_FUZZ_STACK_MIB") {
        Err(_) => kore_fuzz::STACK_SIZE,
        Ok(v) => match v.parse::<usize>() {
            Ok(mib) if (1..=1024).contains(&mib) => mib << 20,
            _ => {
                eprintln!("KORE_FUZZ_STACK_MIB={v:?}: expected a whole number of MiB, 1 to 1024");
                std::process::exit(2);
            }
        },
    };
    let fuzzer = std::thread::Builder::new()
        .name("fuzz".into())
        .stack_size(stack)
        .spawn(move || {
            afl::fuzz!(|data: &[u8]| {
                run(data);
            });
        })
        .expect("the fuzzing thread starts");
    if fuzzer.join().is_err() {
        std::process::abort();
    }
}
