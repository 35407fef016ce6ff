//! `odek-egress serve --policy JSON`: odek's egress proxy (docs/SPEC.md
//! §4.5). odek starts it in a container of its own, on the sandbox's link
//! network and on the egress network, from the sandbox's image with this
//! static binary bind-mounted read-only; it is the sandbox's only way out.
//!
//! It listens on the policy's port, prints
//! `odek-egress ready policy=<sha256> port=<port>` (odek compares the hash
//! with the policy it wrote and refuses the launch otherwise), serves
//! HTTP CONNECT and plain `http://` requests as the policy allows and logs
//! each refusal on stdout (`odek-egress deny host:port reason`), which
//! odek reads back for `describe`. It exits when its stdin ends: the
//! owner's attachment to it, so it goes with the sandbox's owner.

use std::io::Read;
use std::process::ExitCode;

use odek_egress::policy::Policy;

mod proxy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = match args.as_slice() {
        [serve, flag, json] if serve == "serve" && flag == "--policy" => json.clone(),
        _ => {
            eprintln!("usage: odek-egress serve --policy JSON");
            return ExitCode::from(2);
        }
    };
    let policy = match Policy::from_json(&json) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("odek-egress: {e}");
            return ExitCode::from(2);
        }
    };
    // Owner lifetime: the container's stdin is its owner's attachment
    // (StdinOnce); its end, or a stdin that is not open, ends the proxy.
    std::thread::spawn(|| {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 256];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => std::process::exit(0),
                Ok(_) => {}
            }
        }
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("odek-egress: no runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(proxy::serve(policy)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("odek-egress: {e}");
            ExitCode::from(1)
        }
    }
}
