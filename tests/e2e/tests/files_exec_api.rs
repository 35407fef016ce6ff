//! The file tools in a sandbox without odek's supervisor (`ODEK_SUPERVISOR=`,
//! this test binary's own process): refused before anything runs, naming
//! why and the fix, never run through the Docker exec API (as the
//! container's user) nor the image's programs (docs/MCP.md, "File tools").

use odek_core::api::{self, ReadFileRequest, WriteFileRequest};
use odek_core::error::FileErrorKind;
use odek_core::{Client, Error, ExecOptions, LaunchOptions, Silent};
use odek_e2e::{Project, BASE_IMAGE};

#[tokio::test(flavor = "multi_thread")]
async fn through_the_exec_api_file_tools_are_refused_naming_the_fix() {
    // This binary's only test: the variable is the process's.
    std::env::set_var("ODEK_SUPERVISOR", "");
    let p = Project::new();
    let req: api::ResolveRequest = serde_json::from_value(serde_json::json!({
        "workdir": p.path(),
        "settings": {"sandbox": true, "sandbox_image": BASE_IMAGE},
        "read_user_config": false,
        "read_project_config": false,
        "env": {"HOME": p.home.path(), "ODEK_HOME": p.home.path()},
    }))
    .expect("a resolve request");
    let odek = Client::from_env();
    let plan = odek
        .resolve(&req.config_inputs().expect("inputs"), &Silent)
        .await
        .expect("resolve");
    let sandbox = odek
        .launch(&plan, &LaunchOptions::default(), &Silent)
        .await
        .expect("launch");
    assert!(sandbox.supervisor.as_ref().is_some_and(|s| !s.on));
    let opts = ExecOptions::default();
    let e = odek
        .write_file(
            &sandbox,
            &WriteFileRequest {
                path: "made.txt".into(),
                content: "x".into(),
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect_err("refused");
    match &e {
        Error::File(f) => assert_eq!(f.kind, FileErrorKind::NoSupervisor),
        other => panic!("{other:?}"),
    }
    let m = e.to_string();
    assert!(
        m.contains("ODEK_SUPERVISOR=") && m.contains("nothing was done"),
        "{m}"
    );
    assert!(!p.path().join("made.txt").exists(), "something was written");
    std::fs::write(p.path().join("there.txt"), "x").expect("write");
    let e = odek
        .read_file(
            &sandbox,
            &ReadFileRequest {
                path: "there.txt".into(),
                ..Default::default()
            },
            &opts,
        )
        .await
        .expect_err("refused");
    assert!(
        matches!(&e, Error::File(f) if f.kind == FileErrorKind::NoSupervisor),
        "{e:?}"
    );
    odek.destroy(&sandbox).await.expect("destroy");
}
