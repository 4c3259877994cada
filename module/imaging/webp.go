package imaging

// WebP tiles are encoded by libwebp itself (v1.4.0), compiled to
// WebAssembly and run in-process by wazero, a pure-Go runtime: no C
// toolchain at build time and no shared library at run time, so xcaddy's
// default CGO_ENABLED=0 build stays a static binary.
//
// The WebAssembly module is the one github.com/gen2brain/webp v0.5.5 ships
// (libwebp.wasm.gz, provenance and licences in libwebp.wasm.LICENSE; a test
// checks our bytes against that package's). We do not import that package:
// it dlopens a system libwebp.so through purego when one is installed,
// which links purego's fake cgo runtime into Caddy (a CGO_ENABLED=0 build
// becomes dynamically linked) and makes tile bytes depend on which libwebp
// the host happens to have (Debian 12's is 1.2.4). It also passes the
// tile's width, not its stride, to libwebp (wrong pixels for a sub-image),
// reads a premultiplied *image.RGBA as straight alpha, and instantiates a
// fresh module for every call; this driver keeps instances for reuse.

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"io"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	xwebp "golang.org/x/image/webp"
)

//go:embed libwebp.wasm.gz
var libwebpWasmGz []byte

// Lossless: method 4 at effort 75, cwebp's default (-z 6). On the 96
// tiles of the testdata metatiles it stores 0.740× our lossless PNG bytes
// (test:mosaic alone 0.87×, test:polygons 0.65×), at ~35× PNG's CPU;
// -z 5 gives 0.743× at the same CPU, -z 3 (method 3) 0.757× at half, -z 1
// 0.88× at a sixth, -z 9 0.72× at 20× more. Lossy: method 4, cwebp's
// default; method 2 costs 0.4× the CPU for 3 % more bytes. The bytes are
// the very bytes cwebp writes with the same settings.
const (
	webpLosslessMethod = 4
	webpLosslessEffort = 75
	webpLossyMethod    = 4 // cwebp's default -m
)

// webpMaxInstanceBytes bounds the linear memory of an instance kept for
// reuse: WebAssembly memory never shrinks, so an instance that once
// encoded a huge image is dropped rather than pinned in the pool. A 256 px
// tile needs a few MiB, a 1024 px image a few tens.
const webpMaxInstanceBytes = 64 << 20

type webpInstance struct {
	mod                  api.Module
	malloc, free, encode api.Function
}

var webpEngine struct {
	once sync.Once
	err  error
	rt   wazero.Runtime
	cm   wazero.CompiledModule
	mc   wazero.ModuleConfig
	idle chan *webpInstance // instances ready for reuse, at most GOMAXPROCS
}

// WarmWebP compiles the WebP encoder (about 1 s of one core: the compiled
// module is 430 KB of WebAssembly turned into machine code). It is done
// lazily by the first encode otherwise, so a Caddy without WebP layers
// never pays it; a configuration with a WebP layer may call this at
// provisioning, in the background, so that its first tile does not wait.
// Safe for concurrent use; later calls return the first call's result.
func WarmWebP() error {
	webpEngine.once.Do(func() {
		webpEngine.err = compileWebP()
	})
	return webpEngine.err
}

func compileWebP() error {
	zr, err := gzip.NewReader(bytes.NewReader(libwebpWasmGz))
	if err != nil {
		return fmt.Errorf("webp: embedded module: %w", err)
	}
	wasm, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("webp: embedded module: %w", err)
	}
	ctx := context.Background()
	// 1 GiB of linear memory per instance at most (the WebAssembly default
	// is 4 GiB): far above what a tile needs, and a bound on a runaway.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(16384))
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return fmt.Errorf("webp: compile: %w", err)
	}
	// The module imports nothing (no WASI), is a reactor (its libc starts
	// in _initialize) and is instantiated many times, so anonymously.
	webpEngine.rt = rt
	webpEngine.cm = cm
	webpEngine.mc = wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize")
	webpEngine.idle = make(chan *webpInstance, runtime.GOMAXPROCS(0))
	return nil
}

func getWebPInstance(ctx context.Context) (*webpInstance, error) {
	if err := WarmWebP(); err != nil {
		return nil, err
	}
	select {
	case in := <-webpEngine.idle:
		return in, nil
	default:
	}
	mod, err := webpEngine.rt.InstantiateModule(ctx, webpEngine.cm, webpEngine.mc)
	if err != nil {
		return nil, fmt.Errorf("webp: instantiate: %w", err)
	}
	in := &webpInstance{
		mod:    mod,
		malloc: mod.ExportedFunction("malloc"),
		free:   mod.ExportedFunction("free"),
		encode: mod.ExportedFunction("encode"),
	}
	if in.malloc == nil || in.free == nil || in.encode == nil {
		mod.Close(ctx)
		return nil, errors.New("webp: module lacks malloc, free or encode")
	}
	return in, nil
}

// putWebPInstance keeps a healthy instance for the next encode, or closes
// it when the pool is full or its memory has grown past the bound.
func putWebPInstance(ctx context.Context, in *webpInstance) {
	if in.mod.Memory().Size() <= webpMaxInstanceBytes {
		select {
		case webpEngine.idle <- in:
			return
		default:
		}
	}
	in.mod.Close(ctx)
}

// encodeWebP appends m encoded as WebP to dst: lossless when quality is 0
// (the decoded pixels equal m's, except that the colour of a fully
// transparent pixel is not kept, as it cannot be seen), else lossy VP8 at
// that quality (1..100) with the alpha channel kept losslessly. m may be
// any image with any origin. Safe for concurrent use: each call runs on an
// instance of its own.
func encodeWebP(dst *bytes.Buffer, m image.Image, quality int) error {
	if quality < 0 || quality > 100 {
		return fmt.Errorf("webp: quality %d outside 0..100", quality)
	}
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return fmt.Errorf("webp: empty image %v", b)
	}
	// libwebp's own limit.
	if w > 16383 || h > 16383 {
		return fmt.Errorf("webp: image %dx%d exceeds 16383 px a side", w, h)
	}
	ctx := context.Background()
	in, err := getWebPInstance(ctx)
	if err != nil {
		return err
	}
	lossless, q, method := false, quality, webpLossyMethod
	if quality == 0 {
		lossless, q, method = true, webpLosslessEffort, webpLosslessMethod
	}
	out, err := in.run(ctx, m, lossless, q, method)
	if err != nil {
		// A trap can leave the instance's heap in any state: drop it.
		in.mod.Close(ctx)
		return err
	}
	dst.Write(out) // out is a view of the instance's memory: copy before reuse
	putWebPInstance(ctx, in)
	return nil
}

// run encodes m with libwebp's quality (for lossless: effort) and method
// (0..6, speed against size).
func (in *webpInstance) run(ctx context.Context, m image.Image, lossless bool, quality, method int) ([]byte, error) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	n := uint64(4 * w * h)
	res, err := in.malloc.Call(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("webp: malloc: %w", err)
	}
	pix := res[0]
	if pix == 0 {
		return nil, errors.New("webp: out of memory")
	}
	defer in.free.Call(ctx, pix)
	// The pixels go straight into the instance's memory as tightly packed
	// straight-alpha RGBA, whatever m's type, stride and origin.
	view, ok := in.mod.Memory().Read(uint32(pix), uint32(n))
	if !ok {
		return nil, errors.New("webp: pixel buffer outside memory")
	}
	writeNRGBA(view, m)

	res, err = in.malloc.Call(ctx, 4)
	if err != nil {
		return nil, fmt.Errorf("webp: malloc: %w", err)
	}
	sizePtr := res[0]
	if sizePtr == 0 {
		return nil, errors.New("webp: out of memory")
	}
	defer in.free.Call(ctx, sizePtr)

	ll := uint64(0)
	if lossless {
		ll = 1
	}
	// encode(rgba, width, height, size_t *size, colorspace, quality, method,
	// lossless, exact): colorspace 0 is RGBA input; exact 0 lets libwebp
	// rewrite the invisible colour under alpha 0, which compresses better.
	res, err = in.encode.Call(ctx, pix, uint64(w), uint64(h), sizePtr, 0, uint64(quality), uint64(method), ll, 0)
	if err != nil {
		return nil, fmt.Errorf("webp: encode: %w", err)
	}
	outPtr := res[0]
	if outPtr == 0 {
		return nil, errors.New("webp: libwebp refused to encode")
	}
	defer in.free.Call(ctx, outPtr)
	size, ok := in.mod.Memory().ReadUint32Le(uint32(sizePtr)) // size_t is 32-bit in wasm32
	if !ok || size == 0 {
		return nil, errors.New("webp: libwebp wrote nothing")
	}
	out, ok := in.mod.Memory().Read(uint32(outPtr), size)
	if !ok {
		return nil, errors.New("webp: output outside memory")
	}
	return out, nil
}

// writeNRGBA writes m's pixels into dst as rows of straight-alpha RGBA
// without padding; dst is 4·w·h bytes.
func writeNRGBA(dst []byte, m image.Image) {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	row := 4 * w
	switch t := m.(type) {
	case *image.NRGBA:
		for y := range h {
			i := t.PixOffset(b.Min.X, b.Min.Y+y)
			copy(dst[y*row:(y+1)*row], t.Pix[i:i+row])
		}
		return
	case *image.RGBA:
		for y := range h {
			s := t.Pix[t.PixOffset(b.Min.X, b.Min.Y+y):]
			d := dst[y*row : (y+1)*row]
			for x := 0; x < row; x += 4 {
				r, g, bl, a := s[x], s[x+1], s[x+2], s[x+3]
				switch a {
				case 0xff:
					d[x], d[x+1], d[x+2], d[x+3] = r, g, bl, a
				case 0:
					d[x], d[x+1], d[x+2], d[x+3] = 0, 0, 0, 0
				default:
					// The same division color.NRGBAModel does, so a
					// tile compares equal to its decoded WebP through
					// either model.
					a16 := uint32(a) * 0x101
					d[x] = uint8((uint32(r) * 0x101 * 0xffff / a16) >> 8)
					d[x+1] = uint8((uint32(g) * 0x101 * 0xffff / a16) >> 8)
					d[x+2] = uint8((uint32(bl) * 0x101 * 0xffff / a16) >> 8)
					d[x+3] = a
				}
			}
		}
		return
	case *image.Paletted:
		var pal [256][4]byte
		for i, c := range t.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			pal[i] = [4]byte{n.R, n.G, n.B, n.A}
		}
		for y := range h {
			s := t.Pix[t.PixOffset(b.Min.X, b.Min.Y+y):]
			d := dst[y*row : (y+1)*row]
			for x := range w {
				copy(d[4*x:4*x+4], pal[s[x]][:])
			}
		}
		return
	}
	// Anything else (YCbCr from a JPEG upstream, Gray, views) goes through
	// image/draw into an NRGBA that aliases dst.
	draw.Draw(&image.NRGBA{Pix: dst, Stride: row, Rect: image.Rect(0, 0, w, h)}, image.Rect(0, 0, w, h), m, b.Min, draw.Src)
}

// decodeWebP decodes a WebP tile, lossless or lossy, with its alpha, in
// pure Go (golang.org/x/image/webp): lossless files decode to
// *image.NRGBA, lossy ones to *image.NYCbCrA.
func decodeWebP(data []byte) (image.Image, error) {
	return xwebp.Decode(bytes.NewReader(data))
}
