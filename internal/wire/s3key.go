package wire

import "strings"

// S3KeyRefused reports why mce refuses to read or write the S3 location
// s3://bucket/key ("" when it does not): a key with a "." or ".." path
// segment, or an empty one (a key starting with "/", or "//" inside it; a
// final "/" naming a folder is fine). S3 takes such keys literally, but
// S3-compatible stores that keep objects as files (versitygw's POSIX
// backend, which mce's tests use) resolve them, so s3://b/x/../secret or
// s3://b//secret would read an object other than the one its ARN names,
// which is the one the caller was authorized for. Anything that is not an
// s3:// URL passes.
func S3KeyRefused(url string) string {
	rest, ok := strings.CutPrefix(url, "s3://")
	if !ok {
		return ""
	}
	_, key, _ := strings.Cut(rest, "/")
	key = strings.TrimSuffix(key, "/")
	if key == "" {
		return ""
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case ".", "..":
			return "its key has a " + `"` + seg + `"` + " path segment"
		case "":
			return "its key has an empty path segment (a leading slash or two slashes in a row)"
		}
	}
	return ""
}
