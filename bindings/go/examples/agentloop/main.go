// Command agentloop is an agent-framework loop in miniature on odek's Go
// binding (SPEC §10.2): resolve a sandbox attached to a Docker Compose
// project → show the approval request, if any → launch → build the system
// prompt from the environment block → run the agent's shell tool once
// (`redis-cli -h redis ping`) → destroy the sandbox.
//
// From bindings/go, with the fixture project running (from the repository
// root: bash tests/fixtures/compose/up.sh odeke2e<ns>, <ns> being the
// checkout's test namespace of tests/ns.sh, whose images are named
// odek-test-<ns>/…):
//
//	go run ./examples/agentloop -project odeke2e<ns> -image odek-test-<ns>/base:1
//
// Flags: -project (Compose project, default odeke2e), -image (sandbox image,
// default odek-test/base:1), -workdir (project directory, default a fresh
// temporary one), -yes (approve project settings for this launch without
// asking), -timeout (for the whole run).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	odek "github.com/odek-dev/odek/bindings/go"
)

func main() {
	project := flag.String("project", "odeke2e", "Docker Compose project to attach the sandbox to")
	image := flag.String("image", "odek-test/base:1", "sandbox image")
	workdir := flag.String("workdir", "", "project directory mounted at /workspace (default: a new temporary directory)")
	yes := flag.Bool("yes", false, "approve the project's sandbox settings for this launch without asking")
	timeout := flag.Duration("timeout", 2*time.Minute, "time limit for the whole run")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *project, *image, *workdir, *yes); err != nil {
		fmt.Fprintln(os.Stderr, "agentloop:", err)
		var oe *odek.Error
		if errors.As(err, &oe) {
			fmt.Fprintf(os.Stderr, "agentloop: failure class %s, code %d (%s)\n", oe.Class, oe.Code, odek.CodeName(oe.Code))
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, project, image, workdir string, yes bool) error {
	if workdir == "" {
		dir, err := os.MkdirTemp("", "agentloop-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		workdir = dir
	}

	client, err := odek.NewClient(odek.ClientOptions{})
	if err != nil {
		return err
	}
	defer client.Close()

	// 1. Resolve. The framework (the operator's side) asks for the Compose
	//    project; settings in the project's own odek.json would need approval.
	fmt.Printf("resolve: workdir=%s compose project=%s image=%s\n", workdir, project, image)
	plan, err := client.Resolve(ctx, odek.ResolveRequest{
		Workdir: workdir,
		Settings: map[string]any{
			"sandbox_image":           image,
			"sandbox_compose_project": project,
		},
	})
	if err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	fmt.Printf("plan: mode=%s isolation=%s network=%s internet=%v\n",
		plan.Mode, plan.Isolation.Kind, plan.NetworkSummary, plan.Internet)
	for _, n := range plan.Networks {
		fmt.Printf("  network %s internal=%v id=%.12s\n", n.Name, n.Internal, n.ID)
	}
	for _, w := range plan.Warnings {
		fmt.Printf("  warning: %s\n", w.Message)
	}

	// 2. Approval, when the project's own config asks for more.
	var approval *odek.Approval
	if plan.NeedsApproval() {
		a := plan.Approval
		// The same card the odek CLI prompts with; the fields are there too.
		fmt.Print(a.Card)
		if !yes && !askYes("approve for this launch? [y/N] ") {
			return errors.New("the operator did not approve the project's sandbox settings")
		}
		if approval, err = client.Approve(ctx, plan, odek.DecisionOnce); err != nil {
			return fmt.Errorf("approve: %w", err)
		}
		fmt.Println("approved once")
	} else {
		fmt.Println("approval: none needed")
	}

	// 3. Launch. Close removes the container, whatever happens below.
	sb, err := client.Launch(ctx, plan, approval)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer func() {
		if err := sb.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "agentloop: destroy:", err)
		} else {
			fmt.Printf("destroyed sandbox %s\n", sb.Name)
		}
	}()
	fmt.Println(sb.StartupLine)

	// 4. The system prompt gets the environment block; the shell tool gets
	//    the short description.
	d, err := sb.Describe(ctx)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	system := "You are a coding agent. Use the shell tool to work on the project.\n\n" + d.Prompt
	fmt.Printf("--- system prompt ---\n%s\n--- shell tool ---\n%s\n---\n", system, d.Tool)

	// 5. The agent calls its shell tool.
	argv := []string{"redis-cli", "-h", "redis", "ping"}
	fmt.Printf("exec: %s\n", strings.Join(argv, " "))
	res, err := sb.Exec(ctx, odek.ExecRequest{Argv: argv, Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	fmt.Printf("exit=%d stdout=%q stderr=%q\n", res.ExitCode, strings.TrimSpace(res.Stdout), strings.TrimSpace(res.Stderr))
	if res.ExitCode != 0 {
		return fmt.Errorf("exec: exit status %d", res.ExitCode)
	}
	return nil
}

func askYes(prompt string) bool {
	fmt.Print(prompt)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	return strings.EqualFold(strings.TrimSpace(line), "y")
}
