// Command odek-bench-go is the Go binding's exec round-trip worker for
// odek-bench.
//
// It launches one sandbox through the binding (Compose project and image from
// the flags), prints "ready <sandbox-name> <container-id>", then for every
// "exec" line on stdin times sb.Exec(ctx, {Argv: ["true"]}) in-process and
// prints the nanoseconds. "quit" or end of input closes the sandbox (removing
// the container) and prints "bye". With -engine fake it runs against
// libodek's in-memory engine (no Docker): what remains is the binding's and
// the core's own cost per call.
//
// odek-bench builds it (default build: pkg-config odek) against the release
// libodek.so; it is not meant to be run by hand.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	odek "github.com/odek-dev/odek/bindings/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "odek-bench-go:", err)
		os.Exit(1)
	}
}

func run() error {
	workdir := flag.String("workdir", "", "project directory")
	project := flag.String("project", "", "Compose project")
	image := flag.String("image", "", "sandbox image")
	engine := flag.String("engine", "docker", `"docker", or "fake" (libodek's in-memory engine)`)
	flag.Parse()
	if *workdir == "" || *project == "" || *image == "" {
		return fmt.Errorf("-workdir, -project and -image are required")
	}
	ctx := context.Background()
	c, err := odek.NewClient(odek.ClientOptions{Engine: *engine})
	if err != nil {
		return err
	}
	defer c.Close()
	plan, err := c.Resolve(ctx, odek.ResolveRequest{
		Workdir: *workdir,
		Settings: map[string]any{
			"sandbox":                 true,
			"sandbox_image":           *image,
			"sandbox_compose_project": *project,
		},
		IgnoreUserConfig:    true,
		IgnoreProjectConfig: true,
	})
	if err != nil {
		return err
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		return err
	}
	defer sb.Close()
	fmt.Printf("ready %s %s\n", sb.Name, sb.ContainerID)
	in := bufio.NewScanner(os.Stdin)
	req := odek.ExecRequest{Argv: []string{"true"}}
	for in.Scan() {
		cmd := strings.TrimSpace(in.Text())
		if strings.HasPrefix(cmd, "loop ") {
			if err := loop(ctx, sb, req, cmd); err != nil {
				return err
			}
			continue
		}
		switch cmd {
		case "quit":
			return finish(sb)
		case "exec":
			t0 := time.Now()
			r, err := sb.Exec(ctx, req)
			d := time.Since(t0)
			if err != nil {
				return err
			}
			if r.ExitCode != 0 {
				fmt.Printf("error exit %d\n", r.ExitCode)
				continue
			}
			fmt.Println(d.Nanoseconds())
		default:
			fmt.Printf("error unknown command %q\n", cmd)
		}
	}
	return finish(sb)
}

// loop answers "loop N IDLE_MS": N timed calls, each after IDLE_MS
// milliseconds of sleep (0: back to back), their nanoseconds on one line.
func loop(ctx context.Context, sb *odek.Sandbox, req odek.ExecRequest, cmd string) error {
	var n, idle int
	if _, err := fmt.Sscanf(cmd, "loop %d %d", &n, &idle); err != nil {
		fmt.Printf("error bad loop command %q\n", cmd)
		return nil
	}
	times := make([]string, 0, n)
	for i := 0; i < n; i++ {
		if idle > 0 {
			time.Sleep(time.Duration(idle) * time.Millisecond)
		}
		t0 := time.Now()
		r, err := sb.Exec(ctx, req)
		d := time.Since(t0)
		if err != nil {
			return err
		}
		if r.ExitCode != 0 {
			fmt.Printf("error exit %d\n", r.ExitCode)
			return nil
		}
		times = append(times, fmt.Sprint(d.Nanoseconds()))
	}
	fmt.Println(strings.Join(times, " "))
	return nil
}

func finish(sb *odek.Sandbox) error {
	if err := sb.Close(); err != nil {
		return err
	}
	fmt.Println("bye")
	return nil
}
