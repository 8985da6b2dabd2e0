package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"
)

type request struct {
	Op       string   `json:"op"`
	Settings Settings `json:"settings"`
}

type reply struct {
	OK       bool      `json:"ok"`
	Error    string    `json:"error,omitempty"`
	Settings *Settings `json:"settings,omitempty"`
	Stats    *Stats    `json:"stats,omitempty"`
	Dropped  *Dropped  `json:"dropped,omitempty"`
}

var errorModes = map[string]bool{"": true, "unwritable": true, "unreadable": true, "corrupt": true}

func (l *layer) handle(req request) reply {
	switch req.Op {
	case "stats":
	case "set":
		if !errorModes[req.Settings.Error] || req.Settings.WriteBps < 0 || req.Settings.WriteMs < 0 || req.Settings.FsyncMs < 0 {
			return reply{Error: fmt.Sprintf("bad settings %+v: error is one of unwritable, unreadable, corrupt or empty; the rest >= 0", req.Settings)}
		}
		if l.frozen.Load() {
			return reply{Error: "the layer lost power: nothing more reaches it"}
		}
		l.set(req.Settings)
	case "powerloss":
		if l.frozen.Load() {
			return reply{Error: "the layer already lost power"}
		}
		dropped, err := l.powerLoss()
		stats := l.stats(false) // what the walk cut is in dropped
		r := reply{OK: err == nil, Stats: &stats, Dropped: &dropped, Settings: l.current()}
		if err != nil {
			r.Error = err.Error()
		}
		return r
	default:
		return reply{Error: fmt.Sprintf("unknown op %q: stats, set or powerloss", req.Op)}
	}
	stats := l.stats(req.Op == "stats")
	return reply{OK: true, Stats: &stats, Settings: l.current()}
}

func serve(l *layer, path string) (net.Listener, error) {
	_ = os.Remove(path)
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				var req request
				line, err := bufio.NewReader(conn).ReadBytes('\n')
				var r reply
				if err == nil || len(line) > 0 {
					if jerr := json.Unmarshal(line, &req); jerr != nil {
						r = reply{Error: "bad request: " + jerr.Error()}
					} else {
						r = l.handle(req)
					}
				} else {
					r = reply{Error: "no request"}
				}
				_ = json.NewEncoder(conn).Encode(r)
			}()
		}
	}()
	return listener, nil
}

func ctlMain(args []string) int {
	socket := defaultSocket
	if len(args) >= 2 && args[0] == "-socket" {
		socket, args = args[1], args[2:]
	}
	if len(args) != 1 {
		usage()
	}
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultfs ctl: %v (is the layer mounted?)\n", err)
		return 2
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs ctl: %v\n", err)
		return 2
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fmt.Fprintf(os.Stderr, "faultfs ctl: no reply: %v\n", err)
		return 2
	}
	os.Stdout.Write(line)
	var r reply
	if json.Unmarshal(line, &r) != nil || !r.OK {
		return 1
	}
	return 0
}
