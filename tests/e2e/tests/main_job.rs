//! The main job (SPEC §12): a sandbox on a real Compose project reaches its
//! services by name.

use odek_e2e::{operators, stderr, stdout, Project, BASE_IMAGE, PROJECT};

#[test]
fn compose_project_services_answer_by_name() {
    let p = Project::new();
    let out = odek_e2e::run(&mut p.odek(&[
        "run",
        "--sandbox-compose",
        PROJECT,
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        "redis-cli -h redis ping && pg_isready -h postgres",
    ]));
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "stdout:\n{o}\nstderr:\n{e}");
    assert!(o.contains("PONG"), "{o}");
    assert!(o.contains("accepting connections"), "{o}");
    let line = e
        .lines()
        .find(|l| l.starts_with("odek: sandbox "))
        .unwrap_or_else(|| panic!("no startup line in:\n{e}"));
    assert!(line.contains("network=attached"), "{line}");
    assert!(line.contains("pids=4096"), "{line}");
    assert!(line.contains(&format!("image={BASE_IMAGE}")), "{line}");
    assert!(line.contains(&format!("{PROJECT}_backend")), "{line}");
    assert!(line.contains(&format!("{PROJECT}_default")), "{line}");
    assert!(p.leftovers().is_empty(), "container left behind");
}

/// README's runnable `odek run` examples, as written: each logical line
/// (backslash continuations joined) of a ```` ```sh ```` block that starts
/// with `odek run` and has no placeholder (`[sandbox flags]`, `CMD…`), split
/// into words as the shell would (quotes, `#` comments), `odek` dropped;
/// each with the ```` ```text ```` block that follows it directly, if any
/// (the output README shows).
fn readme_runs() -> Vec<(Vec<String>, Option<String>)> {
    let path = odek_e2e::repo().join("README.md");
    let readme = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (ODEK_REPO names the checkout)", path.display()));
    let mut runs = Vec::new();
    let mut lines = readme.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "```sh" {
            continue;
        }
        let mut block = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            block.push(l);
        }
        let shown = (lines.peek().map(|l| l.trim()) == Some("```text")).then(|| {
            lines.next();
            lines
                .by_ref()
                .take_while(|l| l.trim() != "```")
                .collect::<Vec<_>>()
                .join("\n")
        });
        let joined = block.join("\n").replace("\\\n", " ");
        let found: Vec<Vec<String>> = joined
            .lines()
            .map(shell_words)
            .filter(|w| w.len() > 2 && w[0] == "odek" && w[1] == "run")
            .filter(|w| !w.iter().any(|a| a.starts_with('[') || a.contains('…')))
            .map(|w| w[1..].to_vec())
            .collect();
        let last = found.len();
        for (i, argv) in found.into_iter().enumerate() {
            // The output block belongs to the block's last command.
            let out = if i + 1 == last { shown.clone() } else { None };
            runs.push((argv, out));
        }
    }
    runs
}

/// `line` split into words as sh does for what README writes: blanks
/// separate words, '…' and "…" quote, `#` at a word's start begins a comment.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut in_word) = (Vec::new(), String::new(), false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// README's argv with this checkout's names: the Compose project `shop` is
/// the e2e fixture's, the images README names are the base test image
/// (shell, redis-cli, pg_isready, psql).
fn with_test_names(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        out.push(a.clone());
        if a == "--" {
            out.extend(it.by_ref().cloned());
            break;
        }
        let value = match a.as_str() {
            "--sandbox-compose" => Some(("shop", PROJECT)),
            "--sandbox-image" => None,
            _ => continue,
        };
        let v = it.next().expect("a flag's value");
        match value {
            Some((readme, ours)) => {
                assert_eq!(v, readme, "README's Compose project");
                out.push(ours.to_string());
            }
            None => {
                assert!(
                    ["odek-test/base:1", "my-tools:1"].contains(&v.as_str()),
                    "README names an image this test does not map: {v}"
                );
                out.push(BASE_IMAGE.to_string());
            }
        }
    }
    out
}

/// README's runnable examples run literally (with this checkout's project
/// and image names), as root and as a normal user in the `docker` group
/// (only the latter when the suite runs as one, as tests/nonroot/run.sh
/// runs this file): the main job prints what README shows — the same
/// output lines, the warning, and a startup line with README's fields in
/// README's order, `user=` the operator's own uid:gid — and the `psql -U
/// postgres` example answers its query.
#[test]
fn readmes_examples_run_as_written_and_print_what_it_shows() {
    // An egress example reaches hosts on the internet (github.com), which a
    // test may not: egress.rs runs egress mode against stand-in hosts.
    let runs: Vec<_> = readme_runs()
        .into_iter()
        .filter(|(a, _)| !a.iter().any(|x| x == "--sandbox-egress"))
        .collect();
    let argvs: Vec<String> = runs.iter().map(|(a, _)| a.join(" ")).collect();
    assert_eq!(
        runs.len(),
        2,
        "README's runnable `odek run` examples are the main job and psql; a new one needs its check here: {argvs:#?}"
    );
    let (main, shown) = (
        &runs[0].0,
        runs[0]
            .1
            .as_deref()
            .expect("README shows the main job's output"),
    );
    assert!(
        main.join(" ")
            .contains("redis-cli -h redis ping && pg_isready -h postgres"),
        "{main:?}"
    );
    let psql = &runs[1].0;
    assert!(
        psql.join(" ")
            .contains("psql -h postgres -U postgres -c select 1"),
        "{psql:?}"
    );
    let ours = |s: &str| s.replace("shop_", &format!("{PROJECT}_"));
    let shown_line = shown
        .lines()
        .find(|l| l.starts_with("odek: sandbox "))
        .expect("README shows the startup line");
    let shown_out: Vec<&str> = shown.lines().filter(|l| !l.starts_with("odek: ")).collect();
    let fields = |line: &str| -> Vec<(String, String)> {
        line.trim_start_matches("odek: sandbox ")
            .split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let supervised = odek_e2e::supervisor_env().is_some_and(|s| !s.is_empty());

    for op in operators() {
        let p = Project::as_operator(op);
        let me = format!("{}:{}", op.uid(), op.gid());
        let argv = with_test_names(main);
        let out = p.run_odek(&argv.iter().map(String::as_str).collect::<Vec<_>>());
        let (o, e) = (stdout(&out), stderr(&out));
        assert!(
            out.status.success(),
            "{op:?}: {argv:?}\nstdout:\n{o}\nstderr:\n{e}"
        );
        assert_eq!(
            o.lines().collect::<Vec<_>>(),
            shown_out,
            "{op:?}: README's output"
        );
        for warning in shown.lines().filter(|l| l.starts_with("odek: warning: ")) {
            assert!(
                e.contains(&ours(warning)),
                "{op:?}: README's {warning:?} not in:\n{e}"
            );
        }
        let line = e
            .lines()
            .find(|l| l.starts_with("odek: sandbox "))
            .unwrap_or_else(|| panic!("{op:?}: no startup line in:\n{e}"));
        let (got, want) = (fields(line), fields(shown_line));
        assert_eq!(
            got.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            want.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "{op:?}: README's startup line has other fields:\n{line}\n{shown_line}"
        );
        for ((k, v), (_, shown_v)) in got.iter().zip(&want) {
            let expected = match k.as_str() {
                "user" => me.clone(),
                "image" => BASE_IMAGE.to_string(),
                "networks" => ours(shown_v),
                "supervisor" if supervised => shown_v.clone(),
                // The endpoint is this machine's; unsupervised runs say why.
                "endpoint" | "supervisor" => v.clone(),
                _ => shown_v.clone(),
            };
            assert_eq!(v, &expected, "{op:?}: {k}= in {line}");
        }
        assert!(p.leftovers().is_empty(), "{op:?}: container left behind");

        let argv = with_test_names(psql);
        let out = p.run_odek(&argv.iter().map(String::as_str).collect::<Vec<_>>());
        let (o, e) = (stdout(&out), stderr(&out));
        assert!(
            out.status.success(),
            "{op:?}: {argv:?}\nstdout:\n{o}\nstderr:\n{e}"
        );
        assert!(o.contains("(1 row)"), "{op:?}: {o}");
        let line = odek_e2e::startup_line(&out).unwrap_or_else(|| panic!("{op:?}: {e}"));
        assert!(line.contains(&format!(" user={me} ")), "{op:?}: {line}");
        assert!(p.leftovers().is_empty(), "{op:?}: container left behind");
    }
}

#[test]
fn readmes_commands_are_split_as_the_shell_splits_them() {
    assert_eq!(
        shell_words(r#"odek run -- sh -c 'a && b' "c d"e  # comment"#),
        ["odek", "run", "--", "sh", "-c", "a && b", "c de"]
    );
    assert_eq!(
        with_test_names(&shell_words(
            "run --sandbox-compose shop --sandbox-image my-tools:1 -- x --sandbox-compose y"
        )),
        [
            "run",
            "--sandbox-compose",
            PROJECT,
            "--sandbox-image",
            BASE_IMAGE,
            "--",
            "x",
            "--sandbox-compose",
            "y"
        ]
    );
}
