//! Runs files through one fuzz target, outside AFL++: `kore-fuzz-replay <target> <file>...`.
//! A reproducer from `fuzz/run` panics here with the message and backtrace of the crash.

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_default();
    let Some(target) = kore_fuzz::target(&name) else {
        eprintln!("usage: kore-fuzz-replay <target> <file>...");
        for t in kore_fuzz::TARGETS {
            eprintln!("  {:16} {}", t.name, t.about);
        }
        std::process::exit(2);
    };
    let files: Vec<String> = args.collect();
    // On the stack size the fuzzer and the server use (see `kore_fuzz::STACK_SIZE`).
    let replay = std::thread::Builder::new()
        .stack_size(kore_fuzz::STACK_SIZE)
        .spawn(move || {
            for file in files {
                let data = match std::fs::read(&file) {
                    Ok(data) => data,
                    Err(e) => {
                        eprintln!("{file}: {e}");
                        std::process::exit(1);
                    }
                };
                eprintln!("{name}: {file} ({} bytes)", data.len());
                (target.run)(&data);
            }
        })
        .expect("the replay thread starts");
    if replay.join().is_err() {
        std::process::exit(101);
    }
    eprintln!("no crash");
}
