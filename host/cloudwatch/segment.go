package cloudwatch

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Segments: the datapoints of one UTC hour (by period start) live in one
// append-only file, <dir>/metrics-YYYYMMDDHH.seg, deleted whole once the
// hour is past the retention. A file is an 8-byte magic and then records:
//
//	u32 LE payload length | u32 LE CRC-32C of the payload | payload
//
// A payload is a series definition
//
//	'S' | uvarint id | uvarint resolution | str namespace | str name | str unit | uvarint n | n × (str name, str value)
//
// or a datapoint of a series defined earlier in the same file
//
//	'D' | uvarint id | varint period start | f64 count | f64 sum | f64 min | f64 max | sketch (the rest)
//
// (str: uvarint length and bytes; f64: IEEE 754 bits, little endian). An id
// means the series of the latest definition before it, so a file appended
// to by a later run of mce, whose ids differ, reads right. A record is
// written whole with one write and fsynced before its datapoint becomes
// visible in the index; after a crash the first record that is short or
// whose checksum fails ends the file: it is cut there and reported (torn
// tail), and mce starts.

const (
	segMagic      = "MCECWM1\n"
	recHeaderLen  = 8
	maxRecordLen  = 1 << 20 // far above any record mce writes (a full sketch encodes in under 16 KiB)
	segNamePrefix = "metrics-"
	segNameSuffix = ".seg"
	segHourLayout = "2006010215"
	hourSeconds   = 3600
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type segment struct {
	hour int64
	path string
	f    *os.File
	size int64
	// defined: series whose definition this run has written to the file.
	defined map[uint32]bool
}

func segName(hour int64) string {
	return segNamePrefix + time.Unix(hour, 0).UTC().Format(segHourLayout) + segNameSuffix
}

func parseSegName(name string) (int64, bool) {
	if !strings.HasPrefix(name, segNamePrefix) || !strings.HasSuffix(name, segNameSuffix) {
		return 0, false
	}
	t, err := time.Parse(segHourLayout, strings.TrimSuffix(strings.TrimPrefix(name, segNamePrefix), segNameSuffix))
	if err != nil {
		return 0, false
	}
	return t.Unix(), true
}

func appendRecord(b []byte, payload func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, recHeaderLen)...)
	b = payload(b)
	p := b[start+recHeaderLen:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(p, castagnoli))
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendF64(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

func appendDef(b []byte, s *series) []byte {
	return appendRecord(b, func(b []byte) []byte {
		b = append(b, 'S')
		b = binary.AppendUvarint(b, uint64(s.id))
		b = binary.AppendUvarint(b, uint64(s.res))
		b = appendStr(b, s.ns)
		b = appendStr(b, s.name)
		b = appendStr(b, s.unit)
		b = binary.AppendUvarint(b, uint64(len(s.dims)))
		for _, d := range s.dims {
			b = appendStr(b, d.Name)
			b = appendStr(b, d.Value)
		}
		return b
	})
}

func appendPoint(b []byte, id uint32, bk *bucket) []byte {
	return appendRecord(b, func(b []byte) []byte {
		b = append(b, 'D')
		b = binary.AppendUvarint(b, uint64(id))
		b = binary.AppendVarint(b, bk.start)
		b = appendF64(b, bk.st.count)
		b = appendF64(b, bk.st.sum)
		b = appendF64(b, bk.st.min)
		b = appendF64(b, bk.st.max)
		if bk.sketch != nil {
			bk.sketch.Encode(&b, true)
		}
		return b
	})
}

// reader decodes a payload; any short or bad field makes ok false.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.b)) {
		r.ok = false
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) f64() float64 {
	if len(r.b) < 8 {
		r.ok = false
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// pointRec is a decoded datapoint record; sketch aliases the payload.
type pointRec struct {
	id     uint32
	start  int64
	st     stats
	sketch []byte
}

func decodePoint(p []byte) (pointRec, bool) {
	if len(p) == 0 || p[0] != 'D' {
		return pointRec{}, false
	}
	r := reader{b: p[1:], ok: true}
	id := r.uvarint()
	pr := pointRec{start: r.varint()}
	pr.st.count, pr.st.sum, pr.st.min, pr.st.max = r.f64(), r.f64(), r.f64(), r.f64()
	if !r.ok || id > math.MaxUint32 || !(pr.st.count > 0) || math.IsInf(pr.st.count, 0) {
		return pointRec{}, false
	}
	pr.id = uint32(id)
	pr.sketch = r.b
	return pr, true
}

type defRec struct {
	id             uint32
	res            int64
	ns, name, unit string
	dims           []Dimension
}

func decodeDef(p []byte) (defRec, bool) {
	if len(p) == 0 || p[0] != 'S' {
		return defRec{}, false
	}
	r := reader{b: p[1:], ok: true}
	id, res := r.uvarint(), r.uvarint()
	d := defRec{ns: r.str(), name: r.str(), unit: r.str()}
	n := r.uvarint()
	if !r.ok || id > math.MaxUint32 || res > 3600 || n > maxDimensions {
		return defRec{}, false
	}
	d.id, d.res = uint32(id), int64(res)
	for range n {
		d.dims = append(d.dims, Dimension{Name: r.str(), Value: r.str()})
	}
	return d, r.ok
}

// readRecord reads the record at the reader's position into buf (grown as
// needed); ok is false at a clean end of file. A short record or a bad
// checksum is errTorn.
var errTorn = errors.New("torn or corrupt record")

func readRecord(br *bufio.Reader, buf []byte) (payload []byte, n int, err error) {
	var h [recHeaderLen]byte
	k, err := io.ReadFull(br, h[:])
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, k, errTorn
	}
	size := binary.LittleEndian.Uint32(h[:])
	if size == 0 || size > maxRecordLen {
		return nil, k, errTorn
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	m, err := io.ReadFull(br, buf)
	if err != nil {
		return nil, k + m, errTorn
	}
	if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, k + m, errTorn
	}
	return buf, k + m, nil
}

// loadSegments reads every segment in dir into the registry, deletes the
// ones past the retention, cuts torn tails and sets aside files that are
// not segments of this format. It never fails for a bad file: it reports
// it and goes on.
func (st *store) loadSegments() error {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return err
	}
	type file struct {
		hour int64
		name string
	}
	var files []file
	for _, e := range entries {
		if h, ok := parseSegName(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, file{h, e.Name()})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return int(a.hour - b.hour) })
	cutoff := st.nowUnix() - st.retention
	for _, fl := range files {
		path := filepath.Join(st.dir, fl.name)
		if fl.hour+hourSeconds <= cutoff {
			if err := os.Remove(path); err == nil {
				st.c.segmentsExpired.Add(1)
			}
			continue
		}
		st.loadSegment(fl.hour, path)
	}
	return nil
}

func (st *store) loadSegment(hour int64, path string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		st.log.Error().Err(err).Str("file", filepath.Base(path)).Msg("cloudwatch: a metrics segment cannot be opened; its datapoints are not served")
		return
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var magic [len(segMagic)]byte
	if n, _ := io.ReadFull(br, magic[:]); n < len(magic) || string(magic[:]) != segMagic {
		if n == len(magic) || (n > 0 && segMagic[:n] != string(magic[:n])) {
			// Not a segment of this format: keep it aside, start afresh.
			f.Close()
			aside := fmt.Sprintf("%s.corrupt-%d", path, st.nowUnix())
			_ = os.Rename(path, aside)
			st.log.Error().Str("file", filepath.Base(path)).Str("moved_to", filepath.Base(aside)).
				Msg("cloudwatch: a metrics segment does not start as one; set aside, its datapoints are not served")
			return
		}
		// Torn while its header was written: an empty segment.
		if err := f.Truncate(0); err == nil {
			_, err = f.WriteAt([]byte(segMagic), 0)
			if err == nil {
				st.segs[hour] = &segment{hour: hour, path: path, f: f, size: int64(len(segMagic)), defined: map[uint32]bool{}}
				st.diskBytes += int64(len(segMagic))
				return
			}
		}
		f.Close()
		return
	}
	off := int64(len(segMagic))
	local := map[uint32]*series{}
	var buf []byte
	for {
		p, n, err := readRecord(br, buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			torn := fi.Size() - off
			st.c.tornRecords.Add(1)
			st.c.tornBytes.Add(uint64(torn))
			st.log.Warn().Str("file", filepath.Base(path)).Int64("offset", off).Int64("bytes", torn).
				Msg("cloudwatch: a metrics segment ends in a torn or corrupt record (a crash while writing); cut there")
			if terr := f.Truncate(off); terr != nil {
				st.log.Error().Err(terr).Str("file", filepath.Base(path)).Msg("cloudwatch: cannot cut a torn metrics segment")
			}
			break
		}
		buf = p[:0]
		switch p[0] {
		case 'S':
			d, ok := decodeDef(p)
			if !ok {
				local[d.id] = nil
				break
			}
			local[d.id] = st.loadSeries(d)
		case 'D':
			pr, ok := decodePoint(p)
			if s := local[pr.id]; ok && s != nil && pr.start >= hour && pr.start < hour+hourSeconds {
				addRef(s, hour, recRef{off: uint32(off), size: uint32(n), sec: uint16(pr.start - hour)})
				if s.lastSeen.Load() < pr.start {
					s.lastSeen.Store(pr.start)
				}
			}
		}
		off += int64(n)
	}
	st.segs[hour] = &segment{hour: hour, path: path, f: f, size: off, defined: map[uint32]bool{}}
	st.diskBytes += off
}

func (st *store) loadSeries(d defRec) *series {
	dims, err := sortedDims(d.dims)
	if err != nil || checkIdentity(d.ns, d.name, d.unit, Resolution(d.res)) != nil {
		return nil
	}
	s, err := st.lookupLocked(d.ns, d.name, dims, d.unit, d.res)
	if err != nil {
		return nil
	}
	return s
}

// addRef appends a record's place to s's index (store.mu held for writing).
func addRef(s *series, hour int64, r recRef) {
	i := len(s.hours)
	if i == 0 || s.hours[i-1].hour != hour {
		// Hours arrive in order but for a late write to an older hour.
		j, found := slices.BinarySearchFunc(s.hours, hour, func(h hourRefs, t int64) int { return int(h.hour - t) })
		if !found {
			s.hours = slices.Insert(s.hours, j, hourRefs{hour: hour})
		}
		i = j + 1
	}
	s.hours[i-1].refs = append(s.hours[i-1].refs, r)
}

// pointHeadLen covers a datapoint record up to its sketch: the header, the
// type, the id and start varints (at most 15 bytes) and four floats.
const pointHeadLen = recHeaderLen + 1 + 15 + 32

// readPoint reads one record of seg: whole and checked when full, else only
// its statistics (the record was checked when it was read at Open or
// written by this run).
func readPoint(seg *segment, r recRef, buf []byte, full bool) (pointRec, []byte, bool) {
	n := int(r.size)
	if !full && n > pointHeadLen {
		n = pointHeadLen
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := seg.f.ReadAt(buf, int64(r.off)); err != nil || n < recHeaderLen {
		return pointRec{}, buf, false
	}
	p := buf[recHeaderLen:]
	if full && crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(buf[4:]) {
		return pointRec{}, buf, false
	}
	pr, ok := decodePoint(p)
	return pr, buf, ok
}
