// Command lockd-example is a lockd client in Go with net/http only.
//
//	LOCKD_URL=http://127.0.0.1:8080 go run ./examples/go [NAME]
//
// It acquires a lock (waiting up to 5 s), renews it in the background every
// ttl/3 while it works, passes the fencing token on, and releases it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Client talks to one lockd.
type Client struct {
	BaseURL string
	Token   string // bearer token, empty when lockd has no auth_token_file
	HTTP    *http.Client
}

// Grant is lockd's answer to acquire and renew.
type Grant struct {
	Name         string `json:"name"`
	Lease        string `json:"lease"`
	FencingToken int64  `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"`
	ExpiresAt    string `json:"expires_at"`
}

// Error is lockd's error body: {"error": code, "message": ...}.
type Error struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func (c *Client) call(ctx context.Context, method, path, lease string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if lease != "" {
		req.Header.Set("Lock-Lease", lease)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode}
		_ = json.Unmarshal(data, e)
		return e
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func lockPath(name string) string { return "/locks/" + url.PathEscape(name) }

// Acquire asks for the lock, waiting up to wait for it.
func (c *Client) Acquire(ctx context.Context, name string, ttl, wait time.Duration, owner string) (*Grant, error) {
	var g Grant
	body := map[string]any{"ttl_ms": ttl.Milliseconds(), "wait_ms": wait.Milliseconds(), "owner": owner}
	return &g, c.call(ctx, http.MethodPost, lockPath(name), "", body, &g)
}

// Renew extends the lease by its ttl.
func (c *Client) Renew(ctx context.Context, name, lease string) (*Grant, error) {
	var g Grant
	return &g, c.call(ctx, http.MethodPut, lockPath(name), lease, nil, &g)
}

// Release gives the lock back.
func (c *Client) Release(ctx context.Context, name, lease string) error {
	return c.call(ctx, http.MethodDelete, lockPath(name), lease, nil, nil)
}

// WithLock runs fn while holding name; fn's context is cancelled if the lease is lost.
func (c *Client) WithLock(ctx context.Context, name string, ttl, wait time.Duration,
	fn func(ctx context.Context, fencingToken int64) error) error {
	g, err := c.Acquire(ctx, name, ttl, wait, "go-example")
	if err != nil {
		return err
	}
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, err := c.Renew(ctx, name, g.Lease)
				var le *Error
				if errors.As(err, &le) && (le.Code == "not_held" || le.Code == "held_by_other") {
					cancel() // lost: stop the work
					return
				}
			}
		}
	}()
	err = fn(workCtx, g.FencingToken)
	close(done)
	if rerr := c.Release(context.Background(), name, g.Lease); err == nil && workCtx.Err() == nil {
		err = rerr
	}
	return err
}

func main() {
	base := os.Getenv("LOCKD_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	c := &Client{BaseURL: strings.TrimRight(base, "/"), Token: os.Getenv("LOCKD_TOKEN"),
		HTTP: &http.Client{Timeout: 30 * time.Second}}
	name := "examples.go"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	err := c.WithLock(context.Background(), name, 10*time.Second, 5*time.Second,
		func(ctx context.Context, token int64) error {
			fmt.Printf("acquired %s: fencing_token=%d\n", name, token)
			_, err := c.Acquire(ctx, name, time.Second, 0, "go-example-2")
			var le *Error
			if errors.As(err, &le) {
				fmt.Printf("second acquire refused: %s\n", le.Code)
			}
			return nil
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockd-example:", err)
		os.Exit(1)
	}
	fmt.Printf("released %s\n", name)
}
