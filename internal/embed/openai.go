package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	defaultTimeout   = 30 * time.Second
	defaultBatchSize = 32
	// maxResponse bounds what is read from a server: 32 texts × 4096 dims as JSON is
	// about 3 MB; anything near this limit is a broken or hostile server.
	maxResponse = 64 << 20
	// bodyExcerpt is how much of an error response goes into an error message: enough
	// for the server's reason, not enough to flood a log.
	bodyExcerpt = 300
)

// OpenAI embeds through an OpenAI-compatible POST {base}/v1/embeddings.
type OpenAI struct {
	endpoint  string // full URL of /v1/embeddings
	shownURL  string // endpoint without any userinfo, for errors
	apiKey    string
	model     string
	timeout   time.Duration
	batchSize int
	client    *http.Client
	fixedDim  bool
	dim       atomic.Int64 // configured, or learnt from the first good response
}

// HTTPError is a non-200 answer from an embeddings server. Callers may inspect StatusCode
// (errors.As) to decide on a retry: 429 and 5xx are usually worth one, 400/401/404 not.
type HTTPError struct {
	URL        string
	StatusCode int
	Status     string
	Body       string // excerpt, API key removed
}

// Refused reports whether err is the embeddings server refusing the texts themselves (400,
// 413 or 422: too long for the model, or input it cannot take), as opposed to being
// unreachable, overloaded or misconfigured for every text (401, 403, 404, 429, 5xx,
// network errors), which a later try may get past.
func Refused(err error) bool {
	var h *HTTPError
	if !errors.As(err, &h) {
		return false
	}
	switch h.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

func (e *HTTPError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("POST %s: %s", e.URL, e.Status)
	}
	return fmt.Sprintf("POST %s: %s: %s", e.URL, e.Status, e.Body)
}

// NewOpenAI validates cfg and returns the embedder. It makes no request.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai: model is required")
	}
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		return nil, errors.New("openai: base URL is required (e.g. http://localhost:11434 or https://api.openai.com)")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL", redactURL(base))
	}
	// Accept both conventions: "http://host" and "http://host/v1".
	u.Path = strings.TrimSuffix(u.Path, "/v1") + "/v1/embeddings"
	if cfg.Dim < 0 {
		return nil, fmt.Errorf("openai: dim %d is negative", cfg.Dim)
	}
	if cfg.Timeout < 0 || cfg.BatchSize < 0 {
		return nil, errors.New("openai: timeout and batch size must not be negative")
	}
	e := &OpenAI{
		endpoint:  u.String(),
		shownURL:  u.Redacted(),
		apiKey:    cfg.APIKey,
		model:     strings.TrimSpace(cfg.Model),
		timeout:   cfg.Timeout,
		batchSize: cfg.BatchSize,
		client:    cfg.HTTPClient,
		fixedDim:  cfg.Dim > 0,
	}
	if e.timeout == 0 {
		e.timeout = defaultTimeout
	}
	if e.batchSize == 0 {
		e.batchSize = defaultBatchSize
	}
	if e.client == nil {
		e.client = &http.Client{}
	}
	e.dim.Store(int64(cfg.Dim))
	return e, nil
}

// Name implements Embedder: "openai:<model>". The server's address is not part of it, so
// moving the same model to another host keeps the stored vectors valid.
func (e *OpenAI) Name() string { return "openai:" + e.model }

// Dim implements Embedder: the configured dimension, else the one learnt from the first
// response, else 0.
func (e *OpenAI) Dim() int { return int(e.dim.Load()) }

// Embed implements Embedder. Texts go in batches of BatchSize, one request each, in
// order; the first failure stops the call. Blank texts are not sent (servers reject empty
// input) and come back as zero vectors.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var send []int // indexes of texts worth sending
	for i, t := range texts {
		if strings.TrimSpace(t) != "" {
			send = append(send, i)
		}
	}
	batch := make([]string, 0, e.batchSize)
	for start := 0; start < len(send); start += e.batchSize {
		idx := send[start:min(start+e.batchSize, len(send))]
		batch = batch[:0]
		for _, i := range idx {
			batch = append(batch, texts[i])
		}
		vecs, err := e.request(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embed: openai: %w", err)
		}
		for k, i := range idx {
			out[i] = vecs[k]
		}
	}
	dim := e.Dim()
	for i := range out {
		if out[i] == nil {
			out[i] = make([]float32, dim)
		}
	}
	return out, nil
}

type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

func (e *OpenAI) request(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: e.model, Input: texts})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", e.shownURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// *url.Error carries the endpoint (never the key, which is only in a header) and
		// wraps context.DeadlineExceeded / Canceled for errors.Is.
		return nil, e.scrub(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("POST %s: reading response: %w", e.shownURL, e.scrub(err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &HTTPError{URL: e.shownURL, StatusCode: resp.StatusCode, Status: resp.Status, Body: e.excerpt(raw)}
	}
	if len(raw) > maxResponse {
		return nil, fmt.Errorf("POST %s: response larger than %d bytes", e.shownURL, maxResponse)
	}
	var r embeddingsResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("POST %s: malformed response (%v): %s", e.shownURL, err, e.excerpt(raw))
	}
	return e.vectors(&r, len(texts))
}

// vectors checks the response against the request and returns normalised vectors in
// input order. OpenAI documents that data[i].index, not position, says which input an
// embedding belongs to.
func (e *OpenAI) vectors(r *embeddingsResponse, n int) ([][]float32, error) {
	if len(r.Data) != n {
		return nil, fmt.Errorf("POST %s: sent %d texts, got %d embeddings", e.shownURL, n, len(r.Data))
	}
	out := make([][]float32, n)
	dim := 0
	for pos, d := range r.Data {
		i := pos // servers that omit index answer in order
		if d.Index != nil {
			i = *d.Index
		}
		if i < 0 || i >= n {
			return nil, fmt.Errorf("POST %s: embedding index %d out of range [0,%d)", e.shownURL, i, n)
		}
		if out[i] != nil {
			return nil, fmt.Errorf("POST %s: embedding index %d repeated", e.shownURL, i)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("POST %s: embedding %d is empty", e.shownURL, i)
		}
		if dim == 0 {
			dim = len(d.Embedding)
		} else if len(d.Embedding) != dim {
			return nil, fmt.Errorf("POST %s: embeddings of different lengths (%d and %d)", e.shownURL, dim, len(d.Embedding))
		}
		// Normalised in float64, before the float32 it is stored as: a component past
		// float32's range (a broken quantisation) would become Inf there, and then NaN,
		// which pgvector refuses.
		var sum float64
		for _, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("POST %s: embedding %d has a non-finite component", e.shownURL, i)
			}
			sum += x * x
		}
		if math.IsInf(sum, 0) {
			return nil, fmt.Errorf("POST %s: embedding %d is too long to normalise", e.shownURL, i)
		}
		inv := 1.0
		if sum > 0 {
			inv = 1 / math.Sqrt(sum)
		}
		v := make([]float32, len(d.Embedding))
		for k, x := range d.Embedding {
			v[k] = float32(x * inv)
		}
		out[i] = v
	}
	// Learn the dimension once; after that every response must agree, configured or not.
	if e.dim.CompareAndSwap(0, int64(dim)) {
		return out, nil
	}
	if want := e.Dim(); want != dim {
		how := "earlier responses had"
		if e.fixedDim {
			how = "configured dim is"
		}
		return nil, fmt.Errorf("POST %s: embeddings have %d dimensions, %s %d (wrong model?)", e.shownURL, dim, how, want)
	}
	return out, nil
}

// excerpt is a short, single-line, key-free piece of a response body for an error.
func (e *OpenAI) excerpt(b []byte) string {
	s := string(b)
	if e.apiKey != "" {
		// Some servers echo the credential they refused; never let it into a log.
		s = strings.ReplaceAll(s, e.apiKey, "[redacted]")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > bodyExcerpt {
		cut := bodyExcerpt
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// scrub replaces the key in a transport error's text, in case a proxy or a custom
// transport put it there; it keeps the error chain for errors.Is.
func (e *OpenAI) scrub(err error) error {
	if e.apiKey == "" || !strings.Contains(err.Error(), e.apiKey) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(err.Error(), e.apiKey, "[redacted]"), err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (s *scrubbedError) Error() string { return s.msg }
func (s *scrubbedError) Unwrap() error { return s.err }

func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparseable)"
}
