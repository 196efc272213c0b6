package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/mce-run/mce/containers"
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
	checkS3DataSource(c, p+".s3DataSource", m.S3DataSource)
}

// checkS3DataSource applies S3ModelDataSource's constraints; p is its path.
func checkS3DataSource(c *checker, p string, s *S3ModelDataSource) {
	if s == nil {
		c.fail("null", p, "Member must not be null")
		return
	}
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
	s3SourceSemantics(s, "ModelDataSource.S3DataSource", "model", in, m.S3DataSource)
}

// s3SourceSemantics checks how an S3ModelDataSource's members go together
// and what mce can serve; what names it, data what it holds ("model",
// "additional model data"), in the container.
func s3SourceSemantics(s *semantic, what, data, in string, src *S3ModelDataSource) {
	switch {
	case present(src.HubAccessConfig):
		s.add(what + ".HubAccessConfig is not supported by mce" + in + ": give the S3Uri of the " + data + " data.")
	case src.ManifestS3URI != "":
		s.add(what + ".ManifestS3Uri is not supported by mce" + in + ".")
	case strings.HasPrefix(src.S3URI, "https://"):
		s.add(what + ".S3Uri must be an s3:// URL (or mce's file://)" + in + ".")
	case src.S3DataType == "S3Prefix" && src.CompressionType == "None" && !strings.HasSuffix(src.S3URI, "/"):
		s.add(what + ".S3Uri must end with a slash for S3DataType S3Prefix" + in + ": it names the folder of the " + data + "'s files.")
	case src.S3DataType == "S3Prefix" && src.CompressionType != "None":
		s.add(what + " with S3DataType S3Prefix needs CompressionType None" + in + " (an uncompressed folder); for one model.tar.gz use S3Object and Gzip.")
	case src.S3DataType == "S3Object" && src.CompressionType != "Gzip":
		s.add(what + " with S3DataType S3Object needs CompressionType Gzip" + in + " (a model.tar.gz); for a folder of files use S3Prefix and None.")
	case src.S3DataType == "S3Object" && strings.HasSuffix(src.S3URI, "/"):
		s.add(what + ".S3Uri of an S3Object must name an object, not end with a slash" + in + ".")
	}
}

// AdditionalModelDataSource is one of a container's
// AdditionalModelDataSources
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_AdditionalModelDataSource.html):
// more model data (a speculative-decoding draft model, say) that SageMaker
// puts at /opt/ml/additional-model-data-sources/<ChannelName>/, fetched as
// ModelDataSource is. The member stays raw in ContainerDefinition so that
// Describe echoes it as sent.
type AdditionalModelDataSource struct {
	ChannelName  string             `json:"ChannelName,omitempty"`
	S3DataSource *S3ModelDataSource `json:"S3DataSource,omitempty"`
}

// maxAdditionalSources is the API's limit on AdditionalModelDataSources.
const maxAdditionalSources = 5

var channelNameRe = regexp.MustCompile(`^[A-Za-z0-9\.\-_]+$`)

// ParseAdditionalModelDataSources reads a container's
// AdditionalModelDataSources; nil when absent.
func (d *ContainerDefinition) ParseAdditionalModelDataSources() ([]AdditionalModelDataSource, error) {
	if !present(d.AdditionalModelDataSources) {
		return nil, nil
	}
	plain, err := toPlain(FormatJSON, d.AdditionalModelDataSources)
	if err != nil {
		return nil, err
	}
	var out []AdditionalModelDataSource
	if plain == nil {
		return nil, nil
	}
	if err := decodePlain("", plain, reflect.ValueOf(&out).Elem()); err != nil {
		return nil, err
	}
	return out, nil
}

// checkAdditionalSources applies AdditionalModelDataSources' constraints;
// p is the container's path.
func checkAdditionalSources(c *checker, p string, d *ContainerDefinition) {
	if !present(d.AdditionalModelDataSources) {
		return
	}
	p += ".additionalModelDataSources"
	srcs, err := d.ParseAdditionalModelDataSources()
	if err != nil {
		c.fail("", p, "Member must be a list of AdditionalModelDataSource structures: "+err.Error())
		return
	}
	if len(srcs) > maxAdditionalSources {
		c.fail("", p, fmt.Sprintf("Member must have length less than or equal to %d", maxAdditionalSources))
		return
	}
	for i, src := range srcs {
		q := fmt.Sprintf("%s.%d", p, i+1)
		if c.required(q+".channelName", src.ChannelName) {
			c.str(q+".channelName", src.ChannelName, 64, channelNameRe, `[A-Za-z0-9\.\-_]+`)
		}
		checkS3DataSource(c, q+".s3DataSource", src.S3DataSource)
	}
}

// additionalSourcesSemantics checks what mce can serve of a container's
// AdditionalModelDataSources: each a folder or archive as ModelDataSource
// is, under a channel name that is a folder of its own.
func additionalSourcesSemantics(s *semantic, in string, d *ContainerDefinition) {
	srcs, err := d.ParseAdditionalModelDataSources()
	if err != nil || len(srcs) == 0 {
		return
	}
	if d.Mode == ModeMultiModel {
		s.add("AdditionalModelDataSources is not supported in MultiModel mode" + in + ".")
		return
	}
	seen := map[string]bool{}
	for _, src := range srcs {
		what := "AdditionalModelDataSources channel " + strconv.Quote(src.ChannelName)
		switch {
		case src.ChannelName == "." || src.ChannelName == "..":
			s.add("AdditionalModelDataSources ChannelName " + strconv.Quote(src.ChannelName) + " is not a folder name" + in + ": each channel becomes /opt/ml/additional-model-data-sources/<ChannelName>.")
			continue
		case seen[src.ChannelName]:
			s.add("AdditionalModelDataSources names channel " + strconv.Quote(src.ChannelName) + " more than once" + in + ".")
			continue
		}
		seen[src.ChannelName] = true
		if src.S3DataSource == nil {
			continue // reported by the constraint checks
		}
		s3SourceSemantics(s, what+" S3DataSource", "additional model", in, src.S3DataSource)
		checkS3Key(s, "The additional model data of "+what+in, src.S3DataSource.S3URI)
	}
}

// AdditionalModelData is the channels of a container's
// AdditionalModelDataSources with the URL each comes from.
func (d *ContainerDefinition) AdditionalModelData() []containers.ModelDataChannel {
	srcs, err := d.ParseAdditionalModelDataSources()
	if err != nil {
		return nil
	}
	var out []containers.ModelDataChannel
	for _, src := range srcs {
		if src.S3DataSource != nil {
			out = append(out, containers.ModelDataChannel{Channel: src.ChannelName, URL: src.S3DataSource.S3URI})
		}
	}
	return out
}
