// Command testsummary runs `go test -json` with the arguments it is given
// and prints what go test prints without -v (a line per package, the full
// output of each failing test as it fails, build errors), then every
// skipped test with the reason it gave, which plain go test hides, and a
// count. It exits with go test's exit status.
//
//	go run ./internal/testsummary -race -count=1 ./...
//	go test -json ./... | go run ./internal/testsummary -
//
// With "-" alone it reads a `go test -json` stream from standard input and
// exits 1 if a test failed.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := newSummary(stdout)
	if len(args) == 1 && args[0] == "-" {
		if err := scan(stdin, s); err != nil {
			fmt.Fprintf(stderr, "testsummary: reading standard input: %v\n", err)
			return 2
		}
		s.finish()
		if s.failed > 0 {
			return 1
		}
		return 0
	}
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stdin, cmd.Stderr = stdin, stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsummary: start go test: %v\n", err)
		return 2
	}
	scanErr := scan(pipe, s)
	err = cmd.Wait()
	s.finish()
	if scanErr != nil {
		fmt.Fprintf(stderr, "testsummary: reading go test's output: %v\n", scanErr)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintf(stderr, "testsummary: go test: %v\n", err)
		return 2
	case scanErr != nil:
		return 2
	}
	return 0
}

// scan feeds r to s line by line (a test's output line may be long).
func scan(r io.Reader, s *summary) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			}
			s.feed(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
