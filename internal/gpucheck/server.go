package gpucheck

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// server is the toolkit's multi-model server as a child process.
type server struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
	err  error // set before done closes
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer runs serve.py with python, the toolkit on PYTHONPATH, models
// read from modelsDir, and waits for /ping 200.
func startServer(ctx context.Context, o *Options, work, modelsDir string, memoryMB int64) (*server, error) {
	script := filepath.Join(work, "serve.py")
	if err := os.WriteFile(script, servePy, 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(work, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Python, script)
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+o.Toolkit,
		"PYTHONDONTWRITEBYTECODE=1",
		"SAGEMAKER_MULTI_MODEL=true",
		"MCE_FRAMEWORK=pytorch",
		"MCE_MODELS_DIR="+modelsDir,
		"MCE_GPUCHECK_MODELS="+modelsDir,
		"SAGEMAKER_BIND_TO_PORT="+strconv.Itoa(port),
		"SAGEMAKER_MODEL_SERVER_WORKERS="+strconv.Itoa(max(4, o.Clients)),
		"MCE_MODEL_MEMORY_MB="+strconv.FormatInt(memoryMB, 10),
		// The toolkit's own GPU budget (where it has one) out of the way: a
		// load that does not fit meets a real CUDA out-of-memory error.
		"MCE_MODEL_GPU_MEMORY_MB="+strconv.Itoa(1<<20),
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", o.Python, err)
	}
	s := &server{cmd: cmd, base: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		log.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(o.StartTimeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/ping", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("the server exited before answering /ping (%v); its log: %s", s.err, filepath.Join(work, "server.log"))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the server did not answer /ping within %s; its log: %s", o.StartTimeout, filepath.Join(work, "server.log"))
		}
	}
}

// stop ends the server's process group: SIGTERM, then SIGKILL after 5 s.
func (s *server) stop() {
	pgid := s.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	}
}
