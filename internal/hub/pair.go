package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/devdepot-ai/agentd/internal/hub/conns"
	"github.com/devdepot-ai/agentd/internal/hub/pairing"
	"github.com/devdepot-ai/agentd/internal/wire"
)

const maxPairBody = 16 << 10

func (s *Server) handlePair(w http.ResponseWriter, r *http.Request) {
	s.pairs.Add(1)
	var req wire.PairRequest
	body := http.MaxBytesReader(w, r.Body, maxPairBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writePairError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("pairing request larger than %d bytes", maxPairBody))
			return
		}
		writePairError(w, http.StatusBadRequest, "malformed pairing request: "+err.Error())
		return
	}
	if dec.More() {
		writePairError(w, http.StatusBadRequest, "malformed pairing request: more than one JSON object")
		return
	}
	id, org, err := s.pairing.Redeem(r.Context(), req.Code, conns.ClientAddr(r, s.opts.TrustedProxies), pairing.MachineRequest{
		PublicKey: req.PublicKey, Hostname: req.Hostname, OS: req.OS, Arch: req.Arch, Name: req.Name, Version: req.Version,
	})
	if err != nil {
		code := http.StatusInternalServerError
		var pe *pairing.Error
		switch {
		case errors.Is(err, pairing.ErrRateLimited):
			code = http.StatusTooManyRequests
			if errors.As(err, &pe) && pe.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(pe.RetryAfter.Seconds())+1))
			}
		case errors.Is(err, pairing.ErrInvalid):
			code = http.StatusBadRequest
		case errors.Is(err, pairing.ErrWrongCode):
			code = http.StatusForbidden
		case errors.Is(err, pairing.ErrExpired), errors.Is(err, pairing.ErrUsed), errors.Is(err, pairing.ErrLocked):
			code = http.StatusGone
		case errors.Is(err, pairing.ErrKeyRegistered):
			code = http.StatusConflict
		}
		msg := err.Error()
		if code == http.StatusInternalServerError {
			s.log.Error("pairing", zap.Error(err))
			msg = "the hub could not complete the pairing; try again"
		}
		writePairError(w, code, msg)
		return
	}
	s.log.Info("machine paired", zap.String("machine", id), zap.String("org", org), zap.String("hostname", req.Hostname))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(wire.PairResponse{MachineID: id, Org: org})
}

func writePairError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(wire.PairError{Error: msg})
}
