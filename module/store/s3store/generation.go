package s3store

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/store"
)

// perLayer remembers a value per layer: each layer's generation, so that
// a hit costs one GET, not two, and the epochs of the layers whose Version
// was asked (the local tier's). refreshLoop re-reads both, so a truncation
// by another node is seen within refreshEvery.
type perLayer[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

func (p *perLayer[V]) get(layer string) (V, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, ok := p.m[layer]
	return v, ok
}

func (p *perLayer[V]) set(layer string, v V) {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[string]V)
	}
	p.m[layer] = v
	p.mu.Unlock()
}

func (p *perLayer[V]) layers() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]string, 0, len(p.m))
	for l := range p.m {
		out = append(out, l)
	}
	return out
}

// refreshEvery bounds how long a generation switched elsewhere goes unseen.
const refreshEvery = 2 * time.Second

// generation is the layer's current generation, from memory when known.
func (s *Store) generation(layer string) (uint64, error) {
	if g, ok := s.gens.get(layer); ok {
		return g, nil
	}
	g, err := s.readGeneration(layer)
	if err != nil {
		return 0, err
	}
	s.gens.set(layer, g)
	return g, nil
}

// readGeneration asks S3. A layer never truncated has no generation
// object and is in generation 1.
func (s *Store) readGeneration(layer string) (uint64, error) {
	gen := uint64(1)
	err := s.call("generation", func(ctx context.Context) error {
		body, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.generationKey(layer), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		b, err := io.ReadAll(io.LimitReader(body, 32))
		if err != nil {
			return err
		}
		gen, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return 1, nil
	}
	return gen, err
}

// Version names what a layer's tiles are now, for copies of them kept
// elsewhere (a node's local tier): "<generation>.<epoch>". It changes when
// any node truncates the layer or deletes a range of it, and every node
// sees the change within refreshEvery. It is answered from memory, so a
// local tier keeps serving while S3 is down.
func (s *Store) Version(layer string) (string, error) {
	gen, err := s.generation(layer)
	if err != nil {
		return "", err
	}
	ep, ok := s.epochs.get(layer)
	if !ok {
		if ep, err = s.readEpoch(layer); err != nil {
			return "", err
		}
		s.epochs.set(layer, ep)
	}
	return strconv.FormatUint(gen, 10) + "." + ep, nil
}

func (s *Store) readEpoch(layer string) (string, error) {
	ep := "0"
	err := s.call("epoch", func(ctx context.Context) error {
		body, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.epochKey(layer), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		b, err := io.ReadAll(io.LimitReader(body, 32))
		ep = strings.TrimSpace(string(b))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "0", nil
	}
	return ep, err
}

// newEpoch marks a range deletion of the layer. The value only has to
// differ from every earlier one: nodes deleting at once each write their
// own, and whichever lands last still differs from what came before.
func (s *Store) newEpoch(layer string) error {
	ep := strconv.FormatInt(time.Now().UnixNano(), 36)
	err := s.call("epoch", func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.epochKey(layer), strings.NewReader(ep),
			int64(len(ep)), minio.PutObjectOptions{ContentType: "text/plain", DisableMultipart: true})
		return err
	})
	if err != nil {
		return err
	}
	s.epochs.set(layer, ep)
	return nil
}

// TruncateLayer implements store.Tiles: one read and one write, whatever
// the layer holds. Readers move to the new generation at once; the old
// one's objects are deleted in the background (reclaimLoop).
func (s *Store) TruncateLayer(layer string) error {
	gen, err := s.readGeneration(layer)
	if err != nil {
		return err
	}
	next := strconv.FormatUint(gen+1, 10)
	err = s.call("truncate", func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.generationKey(layer), strings.NewReader(next),
			int64(len(next)), minio.PutObjectOptions{ContentType: "text/plain", DisableMultipart: true})
		return err
	})
	if err != nil {
		return err
	}
	s.gens.set(layer, gen+1)
	s.countRemoval()
	s.log.Info("layer truncated", zap.String("layer", layer), zap.Uint64("generation", gen+1))
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

func (s *Store) refreshLoop() {
	defer s.done.Done()
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if !s.Ready() {
			continue
		}
		for _, l := range s.gens.layers() {
			if g, err := s.readGeneration(l); err == nil {
				if old, _ := s.gens.get(l); old != g {
					s.log.Info("layer generation changed", zap.String("layer", l), zap.Uint64("generation", g))
				}
				s.gens.set(l, g)
			}
		}
		for _, l := range s.epochs.layers() {
			if ep, err := s.readEpoch(l); err == nil {
				s.epochs.set(l, ep)
			}
		}
	}
}

// reclaimEvery is how often old generations are looked for even without
// a truncation here: another node's, or one a restart interrupted.
const reclaimEvery = 10 * time.Minute

// reclaimLoop deletes the objects of generations older than the current
// one, a while after a truncation, one batch request at a time, so that
// reclaiming never competes much with the hit path.
func (s *Store) reclaimLoop() {
	defer s.done.Done()
	t := time.NewTicker(reclaimEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
			select {
			case <-s.stop:
				return
			case <-time.After(s.reclaimDelay):
			}
		}
		if !s.Ready() {
			continue
		}
		if n, err := s.Reclaim(); err != nil {
			s.failLog.Warn("reclaiming truncated tiles failed; will retry", zap.Error(err))
		} else if n > 0 {
			s.log.Info("truncated tiles reclaimed", zap.Int64("objects", n))
		}
	}
}

// Reclaim deletes every object of every layer's old generations now and
// reports how many it deleted.
func (s *Store) Reclaim() (int64, error) {
	layers, err := s.children(s.prefix)
	if err != nil {
		return 0, err
	}
	stopped := func() bool {
		select {
		case <-s.stop:
			return true
		default:
			return false
		}
	}
	var total int64
	for _, l := range layers {
		cur, err := s.readGeneration(l)
		if err != nil {
			return total, err
		}
		kids, err := s.children(s.layerPrefix(l))
		if err != nil {
			return total, err
		}
		slices.Sort(kids)
		for _, k := range kids {
			g, err := strconv.ParseUint(k, 10, 64)
			if err != nil || g >= cur {
				continue
			}
			keys, err := s.listAll(s.genPrefix(l, g))
			if err != nil {
				return total, err
			}
			n, err := s.deleteKeys(keys, stopped)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

func (s *Store) listAll(prefix string) ([]string, error) {
	var keys []string
	err := s.call("list", func(context.Context) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			keys = append(keys, obj.Key)
		}
		return nil
	})
	return keys, err
}
