package cloudwatch

import (
	"os"
	"path/filepath"
	"slices"
)

// The flusher: every FlushInterval it writes the periods that have closed
// to their hour's segment (one write and one fsync per segment touched),
// then moves them from the series' slots to the index; every minute it
// deletes the segments past the retention and forgets the series that have
// nothing left. Close runs it one last time with every open period counted
// as closed, so nothing told to the store before Close is lost.

// sealGrace is how long after a period closes the flusher waits before it
// writes it: a value whose time the caller read just before the boundary
// and which arrives just after still counts in its period.
const sealGrace = 1 // second

type pendingPoint struct {
	s     *series
	slot  int
	off   int // in the hour's batch
	size  int
	start int64
}

type hourBatch struct {
	hour  int64
	buf   []byte
	items []pendingPoint
	defs  []uint32
}

// flush writes closed periods (all periods when final) and publishes them.
func (st *store) flush(final bool) {
	st.flushMu.Lock()
	defer st.flushMu.Unlock()
	now := st.nowUnix()

	st.mu.RLock()
	list := st.snapshotLocked()
	st.mu.RUnlock()

	batches := map[int64]*hourBatch{}
	for _, s := range list {
		s.mu.Lock()
		for i := range s.slots {
			b := &s.slots[i]
			if b.start == 0 || b.sealed || (!final && b.start+s.res+sealGrace > now) {
				continue
			}
			hour := b.start - mod(b.start, hourSeconds)
			hb := batches[hour]
			if hb == nil {
				hb = &hourBatch{hour: hour}
				batches[hour] = hb
			}
			seg := st.segs[hour] // read under flushMu, which every change of segs holds
			if (seg == nil || !seg.defined[s.id]) && !slices.Contains(hb.defs, s.id) {
				hb.buf = appendDef(hb.buf, s)
				hb.defs = append(hb.defs, s.id)
			}
			off := len(hb.buf)
			hb.buf = appendPoint(hb.buf, s.id, b)
			hb.items = append(hb.items, pendingPoint{s: s, slot: i, off: off, size: len(hb.buf) - off, start: b.start})
			b.sealed = true
		}
		s.mu.Unlock()
	}

	type written struct {
		hb   *hourBatch
		base int64 // the batch's offset in the file; -1 when lost
	}
	var done []written
	hours := make([]int64, 0, len(batches))
	for h := range batches {
		hours = append(hours, h)
	}
	slices.Sort(hours)
	for _, h := range hours {
		hb := batches[h]
		base := st.writeBatch(hb, now)
		done = append(done, written{hb, base})
	}

	st.mu.Lock()
	for _, w := range done {
		// A batch's hour may have been evicted for the disk bound by a later
		// batch of this flush: its records are gone with the file.
		kept := w.base >= 0 && st.segs[w.hb.hour] != nil
		if w.base >= 0 && !kept {
			st.c.recordsLost.Add(uint64(len(w.hb.items)))
		}
		for _, it := range w.hb.items {
			if kept {
				addRef(it.s, w.hb.hour, recRef{off: uint32(w.base) + uint32(it.off), size: uint32(it.size), sec: uint16(it.start - w.hb.hour)})
			}
			it.s.mu.Lock()
			it.s.slots[it.slot].clear()
			it.s.mu.Unlock()
		}
	}
	st.mu.Unlock()
}

// writeBatch appends a batch to its hour's segment and fsyncs it; it
// returns where the batch starts in the file, or -1 when it was not
// written (logged and counted: the disk bound, or an I/O error).
func (st *store) writeBatch(hb *hourBatch, now int64) int64 {
	n := int64(len(hb.buf))
	lost := func(reason string, err error) int64 {
		st.c.recordsLost.Add(uint64(len(hb.items)))
		ev := st.log.Error()
		if err != nil {
			ev = ev.Err(err)
		}
		ev.Int("datapoints", len(hb.items)).Str("reason", reason).Msg("cloudwatch: closed datapoints could not be stored and are lost")
		return -1
	}
	if !st.makeRoom(n, hb.hour, now) {
		return lost("the metrics store is at its disk limit (Options.MaxDiskBytes)", nil)
	}
	seg, err := st.segment(hb.hour)
	if err != nil {
		return lost("cannot open the hour's segment", err)
	}
	base := seg.size
	if _, err := seg.f.WriteAt(hb.buf, base); err != nil {
		_ = seg.f.Truncate(base)
		return lost("write", err)
	}
	if err := seg.f.Sync(); err != nil {
		_ = seg.f.Truncate(base)
		return lost("fsync", err)
	}
	for _, id := range hb.defs {
		seg.defined[id] = true
	}
	st.mu.Lock()
	seg.size += n
	st.diskBytes += n
	st.mu.Unlock()
	st.c.recordsWritten.Add(uint64(len(hb.items)))
	return base
}

// segment opens (creating) the segment of hour. Called under flushMu.
func (st *store) segment(hour int64) (*segment, error) {
	if seg := st.segs[hour]; seg != nil {
		return seg, nil
	}
	path := filepath.Join(st.dir, segName(hour))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write([]byte(segMagic)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	seg := &segment{hour: hour, path: path, f: f, size: int64(len(segMagic)), defined: map[uint32]bool{}}
	st.mu.Lock()
	st.segs[hour] = seg
	st.diskBytes += seg.size
	st.mu.Unlock()
	syncDir(st.dir)
	return seg, nil
}

// makeRoom deletes the oldest segments (never the hour being written, nor
// the current one) until n more bytes fit under MaxDiskBytes.
func (st *store) makeRoom(n int64, writing, now int64) bool {
	current := now - mod(now, hourSeconds)
	for {
		st.mu.RLock()
		total := st.diskBytes
		st.mu.RUnlock()
		if total+n <= st.maxDisk {
			return true
		}
		oldest := int64(-1)
		for h := range st.segs {
			if h != writing && h != current && (oldest < 0 || h < oldest) {
				oldest = h
			}
		}
		if oldest < 0 {
			return false
		}
		st.log.Warn().Str("file", segName(oldest)).Int64("max_disk_bytes", st.maxDisk).
			Msg("cloudwatch: the metrics store is at its disk limit; the oldest hour is deleted before its retention")
		st.dropSegment(oldest)
		st.c.segmentsEvicted.Add(1)
	}
}

// dropSegment deletes an hour's segment and its datapoints from the index.
// Called under flushMu.
func (st *store) dropSegment(hour int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	seg := st.segs[hour]
	if seg == nil {
		return
	}
	delete(st.segs, hour)
	st.diskBytes -= seg.size
	seg.f.Close()
	os.Remove(seg.path)
	for _, s := range st.reg.byKey {
		s.hours = slices.DeleteFunc(s.hours, func(h hourRefs) bool { return h.hour == hour })
	}
}

// sweep deletes the hours past the retention and forgets series with no
// datapoint left and nothing open.
func (st *store) sweep() {
	st.flushMu.Lock()
	defer st.flushMu.Unlock()
	cutoff := st.nowUnix() - st.retention
	var old []int64
	st.mu.RLock()
	for h := range st.segs {
		if h+hourSeconds <= cutoff {
			old = append(old, h)
		}
	}
	st.mu.RUnlock()
	for _, h := range old {
		st.dropSegment(h)
		st.c.segmentsExpired.Add(1)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.snapshotLocked() {
		if len(s.hours) > 0 || s.lastSeen.Load() >= cutoff {
			continue
		}
		s.mu.Lock()
		if s.slots[0].start == 0 && s.slots[1].start == 0 {
			s.retired = true
			st.removeLocked(s)
		}
		s.mu.Unlock()
	}
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
