package ogc

import "encoding/xml"

// WMSCapabilities is a WMS 1.1.1 capabilities document
// (WMT_MS_Capabilities) as WMS-C, the tiling profile of WMS, extends it:
// VendorSpecificCapabilities lists the TileSets a client may request tile
// by tile. Only what tiled clients read is modelled.
type WMSCapabilities struct {
	XMLName    xml.Name      `xml:"WMT_MS_Capabilities"`
	Version    string        `xml:"version,attr"`
	Service    WMSService    `xml:"Service"`
	Capability WMSCapability `xml:"Capability"`
}

// WMSService is the Service section.
type WMSService struct {
	Name           string      `xml:"Name"`
	Title          string      `xml:"Title"`
	OnlineResource XLinkSimple `xml:"OnlineResource"`
}

// XLinkSimple is an element carrying a simple xlink to href.
type XLinkSimple struct {
	XmlnsXLink string `xml:"xmlns:xlink,attr"`
	Type       string `xml:"xlink:type,attr"`
	Href       string `xml:"xlink:href,attr"`
}

// Link returns an XLinkSimple to href.
func Link(href string) XLinkSimple {
	return XLinkSimple{XmlnsXLink: NSXLink, Type: "simple", Href: href}
}

// WMSCapability lists the operations, the tile sets and the layers.
type WMSCapability struct {
	Request                    WMSRequest    `xml:"Request"`
	Exception                  []string      `xml:"Exception>Format"`
	VendorSpecificCapabilities []WMSCTileSet `xml:"VendorSpecificCapabilities>TileSet"`
	Layer                      WMSLayer      `xml:"Layer"`
}

// WMSRequest holds the operations offered.
type WMSRequest struct {
	GetCapabilities WMSOperation `xml:"GetCapabilities"`
	GetMap          WMSOperation `xml:"GetMap"`
}

// WMSOperation is an operation: its formats and its HTTP GET address.
type WMSOperation struct {
	Formats []string    `xml:"Format"`
	Get     XLinkSimple `xml:"DCPType>HTTP>Get>OnlineResource"`
}

// WMSCTileSet is one WMS-C TileSet: a layer in one SRS, format and style,
// whose tiles are the WIDTH×HEIGHT GetMaps at the listed resolutions,
// aligned on BoundingBox's corner.
type WMSCTileSet struct {
	SRS         string         `xml:"SRS"`
	BoundingBox WMSBoundingBox `xml:"BoundingBox"`
	Resolutions string         `xml:"Resolutions"`
	Width       int            `xml:"Width"`
	Height      int            `xml:"Height"`
	Format      string         `xml:"Format"`
	Layers      string         `xml:"Layers"`
	Styles      string         `xml:"Styles"`
}

// WMSBoundingBox is a WMS 1.1.1 box in an SRS (LatLonBoundingBox when SRS
// is empty).
type WMSBoundingBox struct {
	SRS  string `xml:"SRS,attr,omitempty"`
	MinX Num    `xml:"minx,attr"`
	MinY Num    `xml:"miny,attr"`
	MaxX Num    `xml:"maxx,attr"`
	MaxY Num    `xml:"maxy,attr"`
}

// WMSLayer is a layer of the tree: the root (no Name) or a named layer.
type WMSLayer struct {
	Queryable         int              `xml:"queryable,attr"`
	Opaque            int              `xml:"opaque,attr"`
	Name              string           `xml:"Name,omitempty"`
	Title             string           `xml:"Title"`
	SRS               []string         `xml:"SRS"`
	LatLonBoundingBox *WMSBoundingBox  `xml:"LatLonBoundingBox"`
	BoundingBoxes     []WMSBoundingBox `xml:"BoundingBox"`
	Styles            []WMSStyle       `xml:"Style"`
	Layers            []WMSLayer       `xml:"Layer"`
}

// WMSStyle is a named style of a layer.
type WMSStyle struct {
	Name  string `xml:"Name"`
	Title string `xml:"Title"`
}

// wmscDoctype declares the WMS-C elements inside WMS 1.1.1's DTD, as
// WMS-C documents do, so that validating parsers accept them.
const wmscDoctype = `<!DOCTYPE WMT_MS_Capabilities SYSTEM "http://schemas.opengis.net/wms/1.1.1/WMS_MS_Capabilities.dtd" [
<!ELEMENT VendorSpecificCapabilities (TileSet*) >
<!ELEMENT TileSet (SRS, BoundingBox?, Resolutions, Width, Height, Format, Layers*, Styles*) >
<!ELEMENT Resolutions (#PCDATA) >
<!ELEMENT Width (#PCDATA) >
<!ELEMENT Height (#PCDATA) >
<!ELEMENT Layers (#PCDATA) >
<!ELEMENT Styles (#PCDATA) >
]>
`

// MarshalWMS renders a WMS 1.1.1 capabilities document with its DOCTYPE.
func MarshalWMS(doc *WMSCapabilities) ([]byte, error) { return marshal(wmscDoctype, doc) }
