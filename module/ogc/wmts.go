package ogc

import "encoding/xml"

// Capabilities is a WMTS 1.0.0 GetCapabilities response
// (wmtsGetCapabilities_response.xsd). Fields are in the schema's order.
type Capabilities struct {
	XMLName        xml.Name `xml:"Capabilities"`
	Xmlns          string   `xml:"xmlns,attr"`
	XmlnsOWS       string   `xml:"xmlns:ows,attr"`
	XmlnsXLink     string   `xml:"xmlns:xlink,attr"`
	XmlnsXSI       string   `xml:"xmlns:xsi,attr"`
	XmlnsGML       string   `xml:"xmlns:gml,attr"`
	SchemaLocation string   `xml:"xsi:schemaLocation,attr"`
	Version        string   `xml:"version,attr"`

	ServiceIdentification ServiceIdentification `xml:"ows:ServiceIdentification"`
	OperationsMetadata    OperationsMetadata    `xml:"ows:OperationsMetadata"`
	Contents              Contents              `xml:"Contents"`
	ServiceMetadataURL    *Href                 `xml:"ServiceMetadataURL,omitempty"`
}

// NewCapabilities returns a capabilities document with the namespaces set.
func NewCapabilities() *Capabilities {
	return &Capabilities{
		Xmlns:          NSWMTS,
		XmlnsOWS:       NSOWS,
		XmlnsXLink:     NSXLink,
		XmlnsXSI:       NSXSI,
		XmlnsGML:       NSGML,
		SchemaLocation: NSWMTS + " http://schemas.opengis.net/wmts/1.0/wmtsGetCapabilities_response.xsd",
		Version:        "1.0.0",
	}
}

// ServiceIdentification is ows:ServiceIdentification.
type ServiceIdentification struct {
	Title              string `xml:"ows:Title"`
	Abstract           string `xml:"ows:Abstract,omitempty"`
	ServiceType        string `xml:"ows:ServiceType"`
	ServiceTypeVersion string `xml:"ows:ServiceTypeVersion"`
}

// OperationsMetadata is ows:OperationsMetadata.
type OperationsMetadata struct {
	Operations []Operation `xml:"ows:Operation"`
}

// Operation is one ows:Operation, reachable by HTTP GET at each of Gets.
type Operation struct {
	Name string `xml:"name,attr"`
	Gets []Get  `xml:"ows:DCP>ows:HTTP>ows:Get"`
}

// Get is an ows:Get: an address and the request encodings it takes.
type Get struct {
	Href       string     `xml:"xlink:href,attr"`
	Constraint Constraint `xml:"ows:Constraint"`
}

// Constraint is an ows:Constraint with its allowed values, as WMTS uses it
// for GetEncoding (KVP, REST).
type Constraint struct {
	Name   string   `xml:"name,attr"`
	Values []string `xml:"ows:AllowedValues>ows:Value"`
}

// Href is an element whose only content is an xlink:href.
type Href struct {
	Href string `xml:"xlink:href,attr"`
}

// Contents holds the layers, then the tile matrix sets.
type Contents struct {
	Layers         []Layer         `xml:"Layer"`
	TileMatrixSets []TileMatrixSet `xml:"TileMatrixSet"`
}

// Layer is a WMTS layer (LayerType: the DatasetDescriptionSummary part
// first, then styles, formats, links and resource URLs).
type Layer struct {
	Title             string              `xml:"ows:Title"`
	WGS84BoundingBox  BoundingBox         `xml:"ows:WGS84BoundingBox"`
	Identifier        string              `xml:"ows:Identifier"`
	BoundingBoxes     []BoundingBox       `xml:"ows:BoundingBox"` // in the CRSs of the layer's matrix sets
	Styles            []Style             `xml:"Style"`
	Formats           []string            `xml:"Format"`
	TileMatrixSetLink []TileMatrixSetLink `xml:"TileMatrixSetLink"`
	ResourceURLs      []ResourceURL       `xml:"ResourceURL"`
}

// BoundingBox is an OWS bounding box: lower and upper corner.
type BoundingBox struct {
	CRS         string `xml:"crs,attr,omitempty"`
	LowerCorner Pair   `xml:"ows:LowerCorner"`
	UpperCorner Pair   `xml:"ows:UpperCorner"`
}

// Style is one of a layer's styles.
type Style struct {
	IsDefault  bool   `xml:"isDefault,attr,omitempty"`
	Title      string `xml:"ows:Title,omitempty"`
	Identifier string `xml:"ows:Identifier"`
}

// TileMatrixSetLink names a tile matrix set the layer has tiles in, and
// which tiles of it.
type TileMatrixSetLink struct {
	TileMatrixSet       string               `xml:"TileMatrixSet"`
	TileMatrixSetLimits *TileMatrixSetLimits `xml:"TileMatrixSetLimits,omitempty"`
}

// TileMatrixSetLimits lists, per tile matrix, the range of tiles there are.
type TileMatrixSetLimits struct {
	Limits []TileMatrixLimits `xml:"TileMatrixLimits"`
}

// TileMatrixLimits is the range of rows and columns of one tile matrix
// (rows counted from the top).
type TileMatrixLimits struct {
	TileMatrix string `xml:"TileMatrix"`
	MinTileRow int64  `xml:"MinTileRow"`
	MaxTileRow int64  `xml:"MaxTileRow"`
	MinTileCol int64  `xml:"MinTileCol"`
	MaxTileCol int64  `xml:"MaxTileCol"`
}

// ResourceURL is a RESTful URL template.
type ResourceURL struct {
	Format       string `xml:"format,attr"`
	ResourceType string `xml:"resourceType,attr"`
	Template     string `xml:"template,attr"`
}

// TileMatrixSet is a gridset.
type TileMatrixSet struct {
	Identifier   string       `xml:"ows:Identifier"`
	SupportedCRS string       `xml:"ows:SupportedCRS"`
	TileMatrices []TileMatrix `xml:"TileMatrix"`
}

// TileMatrix is one zoom level. TopLeftCorner is in the CRS's axis order.
type TileMatrix struct {
	Identifier       string `xml:"ows:Identifier"`
	ScaleDenominator Num    `xml:"ScaleDenominator"`
	TopLeftCorner    Pair   `xml:"TopLeftCorner"`
	TileWidth        int    `xml:"TileWidth"`
	TileHeight       int    `xml:"TileHeight"`
	MatrixWidth      int64  `xml:"MatrixWidth"`
	MatrixHeight     int64  `xml:"MatrixHeight"`
}

// OWS 1.1 exception codes, and the WMTS one.
const (
	CodeMissingParameterValue = "MissingParameterValue"
	CodeInvalidParameterValue = "InvalidParameterValue"
	CodeOperationNotSupported = "OperationNotSupported"
	CodeTileOutOfRange        = "TileOutOfRange"
	CodeNoApplicableCode      = "NoApplicableCode"
)

// ExceptionReport is an OWS 1.1 exception report.
type ExceptionReport struct {
	XMLName    xml.Name    `xml:"ows:ExceptionReport"`
	XmlnsOWS   string      `xml:"xmlns:ows,attr"`
	Version    string      `xml:"version,attr"`
	Lang       string      `xml:"xml:lang,attr,omitempty"`
	Exceptions []Exception `xml:"ows:Exception"`
}

// Exception is one ows:Exception.
type Exception struct {
	Code    string `xml:"exceptionCode,attr"`
	Locator string `xml:"locator,attr,omitempty"`
	Text    string `xml:"ows:ExceptionText,omitempty"`
}

// NewExceptionReport is a report of one exception.
func NewExceptionReport(code, locator, text string) *ExceptionReport {
	return &ExceptionReport{
		XmlnsOWS:   NSOWS,
		Version:    "1.1.0",
		Lang:       "en",
		Exceptions: []Exception{{Code: code, Locator: locator, Text: text}},
	}
}
