// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

package xfer

import (
	"github.com/tdmpi/tdmpi/internal/log"

	"github.com/rs/zerolog"
	"github.com/tdmpi/tdmpi/group"
)

// Every communication operation (InitRemote, FromRemoteInit, Send, Recv,
// ISend, IRecv and the collectives) writes one info line "op start" when
// it starts and one error line "op failed" when it returns an error,
// through the process logger of internal/log (quiet unless TDMPI_LOG
// asks). A start line carries op, group_rank and group_size, the peer (dst,
// src or root) when there is one, bytes (the tensor bytes this rank
// contributes, when known before the transfer) and tag (the first tag of a
// point-to-point transfer). A job killed in the middle of an operation
// thus leaves the operation's name as the last line of its survivors.
//
// With logging disabled, each costs one atomic load and a level check, and
// allocates nothing: the fields are only built for an enabled level.

// InfoOn reports whether start lines are written, for callers whose
// fields cost something to compute.
func InfoOn() bool {
	return log.Logger().GetLevel() <= zerolog.InfoLevel && zerolog.GlobalLevel() <= zerolog.InfoLevel
}

// LogStart writes the start line of a point-to-point operation. bytes and
// tag are left out when negative.
func (l *Link) LogStart(bytes int64, tag int) {
	e := log.Logger().Info()
	if e == nil {
		return
	}
	e.Str("op", l.Op).Int("group_rank", l.Group.Rank()).Int("group_size", l.Group.Size())
	switch l.Dir {
	case "to":
		e.Int("dst", l.Peer)
	case "from":
		e.Int("src", l.Peer)
	default:
		e.Int("root", l.Peer)
	}
	if bytes >= 0 {
		e.Int64("bytes", bytes)
	}
	if tag >= 0 {
		e.Int("tag", tag)
	}
	e.Msg("op start")
}

// LogCollStart writes the start line of a collective on g. root and
// bytes(rank) are left out when negative; bytes is only called when the
// line is written.
func LogCollStart(op string, g *group.Group, root int, bytes func(rank int) int64) {
	e := log.Logger().Info()
	if e == nil {
		return
	}
	e.Str("op", op).Int("group_rank", g.Rank()).Int("group_size", g.Size())
	if root >= 0 {
		e.Int("root", root)
	}
	if bytes != nil {
		if n := bytes(g.Rank()); n >= 0 {
			e.Int64("bytes", n)
		}
	}
	e.Msg("op start")
}

// LogFailed writes the error line of op if err is not nil, and returns
// err.
func LogFailed(op string, err error) error {
	if err == nil {
		return nil
	}
	if e := log.Logger().Error(); e != nil {
		e.Str("op", op).Err(err).Msg("op failed")
	}
	return err
}
