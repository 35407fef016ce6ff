//! Pull by digest for real (SPEC §5, §6.1) from the loopback test registry
//! (tests/registry/start.sh). One test function: the registry steps are
//! serialized and no other test in this binary touches the pinned ref.

use std::process::Command;

use odek_e2e::{
    assert_refused, docker, docker_ok, repo, run_timeout, startup_line, stderr, stdout, strs,
    Project,
};

/// Starts (or reuses) the registry and returns the pinned reference it prints.
fn pinned_ref() -> String {
    let out = run_timeout(
        Command::new("bash").arg(repo().join("tests/registry/start.sh")),
        std::time::Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "tests/registry/start.sh failed:\n{}",
        stderr(&out)
    );
    let r = stdout(&out)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();
    let (_, digest) = r
        .split_once("@sha256:")
        .unwrap_or_else(|| panic!("start.sh printed no pinned ref: {r:?}"));
    assert!(
        digest.len() == 64 && digest.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
        "bad digest in {r}"
    );
    r
}

#[test]
fn pull_by_digest_from_the_loopback_registry() {
    odek_e2e::fixture();
    let pinned = pinned_ref();
    let (repo_name, digest) = pinned.split_once('@').expect("repo@digest");

    // Make sure the pinned ref is not present locally (only that ref).
    let _ = docker_ok(&["rmi", &pinned]);
    assert!(
        !docker_ok(&["image", "inspect", &pinned]),
        "{pinned} is still present locally"
    );

    let p = Project::new();
    let out = p.odek_ok(&[
        "run",
        "--sandbox",
        "--sandbox-image",
        &pinned,
        "--",
        "sh",
        "-c",
        "echo pulled-and-ran",
    ]);
    assert_eq!(stdout(&out).trim(), "pulled-and-ran");
    assert!(
        stderr(&out).contains("pulling"),
        "odek did not pull (was the image present?):\n{}",
        stderr(&out)
    );
    let line = startup_line(&out).expect("startup line");
    assert!(line.contains(&format!("image={pinned}")), "{line}");
    let digests = docker(&["image", "inspect", "-f", "{{json .RepoDigests}}", &pinned]);
    assert!(
        digests.contains(&pinned),
        "RepoDigests {digests} lacks {pinned}"
    );
    assert!(p.leftovers().is_empty());

    // Second run: present locally now, no pull needed, still runs by digest.
    let again = p.odek_ok(&["run", "--sandbox", "--sandbox-image", &pinned, "--", "true"]);
    assert!(
        !stderr(&again).contains("pulling"),
        "pulled again although present:\n{}",
        stderr(&again)
    );

    // Config view reports the digest.
    let view = stdout(&p.odek_ok(&["config", "view", "--json", "--sandbox-image", &pinned]));
    let v: serde_json::Value = serde_json::from_str(&view).expect("JSON");
    assert_eq!(v["image"]["digest"], digest, "{view}");

    // Same repository, a different valid digest: not in the registry.
    let mut other = format!("{:064x}", 0xdead_beef_u64);
    if other == digest.trim_start_matches("sha256:") {
        other = "1".repeat(64);
    }
    let wrong = format!("{repo_name}@sha256:{other}");
    let p = Project::new();
    let mut argv: Vec<String> = ["run", "--sandbox", "--sandbox-image", &wrong, "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.extend(p.marker_argv());
    let out = p.run_odek(&strs(&argv));
    assert_refused(&p, &out, "image-unavailable");
    assert!(
        !docker_ok(&["image", "inspect", &wrong]),
        "{wrong} exists locally after a failed pull"
    );
    // never retried with a tag
    let tagged = format!("{repo_name}:latest");
    assert!(
        !docker_ok(&["image", "inspect", &tagged]),
        "{tagged} appeared: the failed digest pull was retried by tag"
    );

    // Leave the machine as found: the pinned ref was pulled by this test.
    let _ = docker_ok(&["rmi", &pinned]);
}
