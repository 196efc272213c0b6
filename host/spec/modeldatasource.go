package spec

import (
	"encoding/json"
	"strings"
)

// ModelDataSource is a container's ModelDataSource
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ModelDataSource.html): where SageMaker
// finds model data that is not one archive, as JumpStart and large language
// models use. mce supports its S3DataSource: an uncompressed folder
// (S3DataType S3Prefix, CompressionType None) under an s3:// prefix or a
// file:// folder (mce), or one gzip archive (S3Object, Gzip), the same as a
// ModelDataUrl. The member stays raw in ContainerDefinition so that
// Describe echoes it as sent; ParseModelDataSource reads it.
type ModelDataSource struct {
	S3DataSource *S3ModelDataSource `json:"S3DataSource,omitempty"`
}

// S3ModelDataSource is ModelDataSource.S3DataSource.
type S3ModelDataSource struct {
	S3URI             string             `json:"S3Uri,omitempty"`
	S3DataType        string             `json:"S3DataType,omitempty"`      // S3Prefix or S3Object
	CompressionType   string             `json:"CompressionType,omitempty"` // None or Gzip
	ModelAccessConfig *ModelAccessConfig `json:"ModelAccessConfig,omitempty"`
	HubAccessConfig   json.RawMessage    `json:"HubAccessConfig,omitempty"` // refused
	ManifestS3URI     string             `json:"ManifestS3Uri,omitempty"`   // refused
	ETag              string             `json:"ETag,omitempty"`            // ignored locally
	ManifestEtag      string             `json:"ManifestEtag,omitempty"`    // ignored locally
}

// ModelAccessConfig is the end-user licence acceptance of gated models.
// mce serves only what the caller can already read, so it checks the shape
// and gives AcceptEula no further meaning.
type ModelAccessConfig struct {
	AcceptEula *bool `json:"AcceptEula,omitempty"`
}

// ParseModelDataSource reads a container's ModelDataSource; nil when absent.
func (d *ContainerDefinition) ParseModelDataSource() (*ModelDataSource, error) {
	if !present(d.ModelDataSource) {
		return nil, nil
	}
	var m ModelDataSource
	if err := DecodeJSON(d.ModelDataSource, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// ModelData is the URL the container's model data comes from: its
// ModelDataUrl, or what its ModelDataSource names (an s3:// or file:// URL
// ending in "/" for an uncompressed folder). Empty when neither is given or
// the source does not parse (Validate reports it).
func (d *ContainerDefinition) ModelData() string {
	if d.ModelDataURL != "" {
		return d.ModelDataURL
	}
	m, err := d.ParseModelDataSource()
	if err != nil || m == nil || m.S3DataSource == nil {
		return ""
	}
	return m.S3DataSource.S3URI
}

// checkModelDataSource applies the constraints and mce's limits to
// ModelDataSource; p is the container's path.
func checkModelDataSource(c *checker, p string, d *ContainerDefinition) {
	if !present(d.ModelDataSource) {
		return
	}
	p += ".modelDataSource"
	m, err := d.ParseModelDataSource()
	if err != nil {
		c.fail("", p, "Member must be a ModelDataSource structure: "+err.Error())
		return
	}
	s := m.S3DataSource
	if s == nil {
		c.fail("null", p+".s3DataSource", "Member must not be null")
		return
	}
	p += ".s3DataSource"
	if c.required(p+".s3Uri", s.S3URI) {
		c.str(p+".s3Uri", s.S3URI, maxModelDataURLLen, modelDataURLRe, modelDataURLPattern)
	}
	if c.required(p+".s3DataType", s.S3DataType) {
		c.enum(p+".s3DataType", s.S3DataType, "S3Prefix", "S3Object")
	}
	if c.required(p+".compressionType", s.CompressionType) {
		c.enum(p+".compressionType", s.CompressionType, "None", "Gzip")
	}
	if s.ModelAccessConfig != nil && s.ModelAccessConfig.AcceptEula == nil {
		c.fail("null", p+".modelAccessConfig.acceptEula", "Member must not be null")
	}
}

// modelDataSourceSemantics checks how the members of ModelDataSource go
// together and what mce can serve; in names the container.
func modelDataSourceSemantics(s *semantic, in string, d *ContainerDefinition) {
	if !present(d.ModelDataSource) {
		return
	}
	if d.ModelDataURL != "" {
		s.add("Specify either ModelDataUrl or ModelDataSource, not both" + in + ".")
		return
	}
	if d.Mode == ModeMultiModel {
		s.add("ModelDataSource is not supported in MultiModel mode" + in + ": give the prefix of the model archives as ModelDataUrl.")
		return
	}
	m, err := d.ParseModelDataSource()
	if err != nil || m.S3DataSource == nil {
		return // reported by the constraint checks
	}
	src := m.S3DataSource
	switch {
	case present(src.HubAccessConfig):
		s.add("ModelDataSource.S3DataSource.HubAccessConfig is not supported by mce" + in + ": give the S3Uri of the model data.")
	case src.ManifestS3URI != "":
		s.add("ModelDataSource.S3DataSource.ManifestS3Uri is not supported by mce" + in + ".")
	case strings.HasPrefix(src.S3URI, "https://"):
		s.add("ModelDataSource.S3DataSource.S3Uri must be an s3:// URL (or mce's file://)" + in + ".")
	case src.S3DataType == "S3Prefix" && src.CompressionType == "None" && !strings.HasSuffix(src.S3URI, "/"):
		s.add("ModelDataSource.S3DataSource.S3Uri must end with a slash for S3DataType S3Prefix" + in + ": it names the folder of the model's files.")
	case src.S3DataType == "S3Prefix" && src.CompressionType != "None":
		s.add("ModelDataSource.S3DataSource with S3DataType S3Prefix needs CompressionType None" + in + " (an uncompressed folder); for one model.tar.gz use S3Object and Gzip.")
	case src.S3DataType == "S3Object" && src.CompressionType != "Gzip":
		s.add("ModelDataSource.S3DataSource with S3DataType S3Object needs CompressionType Gzip" + in + " (a model.tar.gz); for a folder of files use S3Prefix and None.")
	case src.S3DataType == "S3Object" && strings.HasSuffix(src.S3URI, "/"):
		s.add("ModelDataSource.S3DataSource.S3Uri of an S3Object must name an object, not end with a slash" + in + ".")
	}
}
