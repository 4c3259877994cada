package imaging

import "testing"

func mustSettings(c PNGCompression) pngSettings {
	s, err := pngSettingsOf(c)
	if err != nil {
		panic(err)
	}
	return s
}

var trueColorSettings = pngSettings{flatLevel: 7, toneLevel: 6, filter: filterEstimate, trueColor: true}

var _ = testing.Short
