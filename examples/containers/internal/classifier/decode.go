package classifier

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// DecodeRows parses a request body of media type mediaType (TypeCSV or TypeJSON) into rows of exactly
// width finite numbers. text/csv: one row per record, blank lines skipped, fields may be quoted and padded
// with spaces. application/json: {"instances": [[…], …]} or [[…], …]. Errors are 4xx *smserve.Error
// values naming the offending row.
func DecodeRows(mediaType string, body []byte, width int) ([][]float64, error) {
	var rows [][]float64
	switch mediaType {
	case TypeCSV:
		r := csv.NewReader(bytes.NewReader(body))
		r.FieldsPerRecord = -1
		r.ReuseRecord = true
		for {
			rec, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, smserve.Errorf(http.StatusBadRequest, "CSV: %w", err)
			}
			if len(rows) == MaxRows {
				return nil, tooMany()
			}
			if len(rec) != width {
				return nil, widthError(len(rows)+1, len(rec), width)
			}
			row := make([]float64, width)
			for j, f := range rec {
				v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
				if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, smserve.Errorf(http.StatusBadRequest, "row %d, column %d: %q is not a finite number", len(rows)+1, j+1, f)
				}
				row[j] = v
			}
			rows = append(rows, row)
		}
	case TypeJSON:
		trimmed := bytes.TrimSpace(body)
		var err error
		if len(trimmed) > 0 && trimmed[0] == '[' {
			err = json.Unmarshal(trimmed, &rows)
		} else {
			var in struct {
				Instances [][]float64 `json:"instances"`
			}
			err = json.Unmarshal(trimmed, &in)
			rows = in.Instances
		}
		if err != nil {
			return nil, smserve.Errorf(http.StatusBadRequest, `JSON body must be {"instances": [[numbers…], …]}: %w`, err)
		}
		if len(rows) > MaxRows {
			return nil, tooMany()
		}
		for i, row := range rows {
			if len(row) != width {
				return nil, widthError(i+1, len(row), width)
			}
		}
	default:
		return nil, smserve.Errorf(http.StatusUnsupportedMediaType, "unsupported media type %q", mediaType)
	}
	if len(rows) == 0 {
		return nil, smserve.Errorf(http.StatusBadRequest, "no instances in the request")
	}
	return rows, nil
}

func widthError(row, got, want int) error {
	return smserve.Errorf(http.StatusBadRequest, "row %d has %d features, the model takes %d", row, got, want)
}

func tooMany() error {
	return smserve.Errorf(http.StatusRequestEntityTooLarge, "more than %d instances in one request", MaxRows)
}
