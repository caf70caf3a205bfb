package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/embed"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// newRooms builds the rooms toolset with its embedder, secret detector and signing key.
// Wakes stay nil until the wake engine is wired (rooms.Service.Wakes).
func newRooms(cfg config.Config, log *slog.Logger, database *pg.DB, q *db.Queries, r *tenancy.Resolver, publicURL string) (*rooms.Service, error) {
	emb, err := embed.New(embed.Config{Kind: cfg.Embedder, BaseURL: cfg.EmbedURL, Model: cfg.EmbedModel, APIKey: cfg.EmbedAPIKey, Dim: cfg.EmbedDim})
	if err != nil {
		return nil, fmt.Errorf("app: rooms: %w", err)
	}
	det, err := secrets.NewDetector()
	if err != nil {
		return nil, fmt.Errorf("app: rooms: %w", err)
	}
	key := []byte(cfg.SigningKey)
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		log.Warn("RELAYROOM_SIGNING_KEY is not set: attachment download links work only on this process")
	}
	return &rooms.Service{
		DB: database, Q: q, Resolver: r, Embedder: emb, Secrets: det, SigningKey: key,
		MaxAttachmentBytes: cfg.AttachmentMaxBytes, PublicURL: publicURL, Now: time.Now, Log: log,
		EmbedTimeout: cfg.EmbedWait,
	}, nil
}

// roomRoutes are the rooms toolset's HTTP API beside MCP: task attachments (upload with
// an agent key, download by signed link) and accepting or rejecting a task's result.
func (a *App) roomRoutes(e *echo.Echo) {
	e.POST(routeUpload, a.uploadAttachment)
	e.GET("/api/rooms/:project_id/attachments/:attachment_id", a.downloadAttachment)
	e.POST("/api/rooms/:project_id/tasks/:task_id/accept", a.reviewTask("accepted"))
	e.POST("/api/rooms/:project_id/tasks/:task_id/reject", a.reviewTask("rejected"))
}

// maxReviewBody bounds an accept or reject body: a comment, not a document.
const maxReviewBody = 64 << 10

// roomScope authenticates an agent key for the room in the path, under the same
// failed-authentication limits as the MCP endpoints, and refuses a guest whose agreement
// is not active.
func (a *App) roomScope(c echo.Context) (tenancy.Scope, error) {
	return a.limited(auth.AgentKey, func(ctx context.Context, r *http.Request) (tenancy.Scope, error) {
		key := auth.AgentKey(r)
		if key == "" {
			return tenancy.Scope{}, noCredential()
		}
		id, err := uuid.Parse(c.Param("project_id"))
		if err != nil {
			if _, err := a.resolver.Agent(ctx, key); err != nil {
				return tenancy.Scope{}, err
			}
			return tenancy.Scope{}, apperr.New(apperr.Forbidden, tenancy.MsgNotParticipant)
		}
		sc, err := a.resolver.RoomByKey(ctx, key, id)
		if err != nil {
			return tenancy.Scope{}, err
		}
		// These routes are not MCP tools, so the agreement check the tools get is made here.
		if err := sc.Admitted(); err != nil {
			return tenancy.Scope{}, err
		}
		return sc, nil
	})(c.Request().Context(), c.Request())
}

// apiError answers an apperr as {"error": message} with its HTTP status.
func (a *App) apiError(c echo.Context, err error) error {
	ae, ok := apperr.As(err)
	code, found := 0, false
	if ok && ae.Code != apperr.Internal {
		code, found = apperr.HTTPStatus(ae.Code), true
	}
	if !found {
		a.log.ErrorContext(c.Request().Context(), "rooms api", "error", err.Error())
		return c.JSON(http.StatusInternalServerError, map[string]string{"error": "internal error", "request_id": RequestID(c.Request().Context())})
	}
	if code == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer scope="rooms"`)
	}
	if secs, ok := ae.Details["retry_after_seconds"].(int); ok && code == http.StatusTooManyRequests {
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	}
	return c.JSON(code, map[string]string{"error": ae.Message})
}

// uploadReadError answers an upload whose body could not be read: the in-flight byte
// budget's refusal (limits.go) as such, anything else as a bad upload.
func (a *App) uploadReadError(c echo.Context, err error) error {
	if e, ok := apperr.As(err); ok {
		return a.refuse(c, e)
	}
	return a.apiError(c, apperr.New(apperr.Invalid, "cannot read the upload: %v", err))
}

func (a *App) uploadAttachment(c echo.Context) error {
	sc, err := a.roomScope(c)
	if err != nil {
		return a.apiError(c, err)
	}
	r := c.Request()
	// Refuse before reading up to 25 MB that would be thrown away.
	if err := a.rooms.CanAttach(r.Context(), sc, c.Param("task_id")); err != nil {
		return a.apiError(c, err)
	}
	limit := a.rooms.MaxAttachment()
	var (
		name, ctype string
		body        []byte
	)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		// The form's overhead is allowed on top of the file's own limit.
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit+1<<20)
		f, fh, err := r.FormFile("file")
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return a.apiError(c, a.rooms.TooLarge())
			}
			if e, ok := apperr.As(err); ok { // the in-flight byte budget (limits.go)
				return a.refuse(c, e)
			}
			return a.apiError(c, apperr.New(apperr.Invalid, "multipart upload needs a file field named \"file\""))
		}
		defer f.Close()
		if body, err = io.ReadAll(io.LimitReader(f, limit+1)); err != nil {
			return a.uploadReadError(c, err)
		}
		name, ctype = fh.Filename, fh.Header.Get("Content-Type")
	} else {
		if body, err = io.ReadAll(io.LimitReader(r.Body, limit+1)); err != nil {
			return a.uploadReadError(c, err)
		}
		name, ctype = c.QueryParam("filename"), r.Header.Get("Content-Type")
	}
	if int64(len(body)) > limit {
		return a.apiError(c, a.rooms.TooLarge())
	}
	res, err := a.rooms.Upload(r.Context(), sc, c.Param("task_id"), name, ctype, body)
	if err != nil {
		return a.apiError(c, err)
	}
	return c.JSON(http.StatusCreated, res)
}

func (a *App) downloadAttachment(c echo.Context) error {
	f, err := a.rooms.Download(c.Request().Context(), c.Param("project_id"), c.Param("attachment_id"), c.QueryParam("exp"), c.QueryParam("sig"))
	if err != nil {
		return a.apiError(c, err)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	return c.Blob(http.StatusOK, f.ContentType, f.Content)
}

func (a *App) reviewTask(verdict string) echo.HandlerFunc {
	return func(c echo.Context) error {
		sc, err := a.roomScope(c)
		if err != nil {
			return a.apiError(c, err)
		}
		var body struct {
			Comment string `json:"comment"`
		}
		if c.Request().ContentLength != 0 {
			raw, err := io.ReadAll(io.LimitReader(c.Request().Body, maxReviewBody))
			if err != nil {
				return a.apiError(c, apperr.New(apperr.Invalid, "cannot read the body: %v", err))
			}
			if len(bytes.TrimSpace(raw)) > 0 {
				// The raw bytes are checked: decoding would hide invalid UTF-8 behind U+FFFD.
				if path, err := text.CheckJSON(raw); err != nil && !errors.Is(err, text.ErrSyntax) {
					if path == "" {
						path = "body"
					}
					return a.apiError(c, apperr.New(apperr.Invalid, "%s %v", path, err))
				}
				if err := json.Unmarshal(raw, &body); err != nil {
					return a.apiError(c, apperr.New(apperr.Invalid, "body must be JSON: {\"comment\": \"…\"} (optional)"))
				}
			}
		}
		res, err := a.rooms.ReviewTask(c.Request().Context(), sc, c.Param("task_id"), verdict, body.Comment)
		if err != nil {
			return a.apiError(c, err)
		}
		return c.JSON(http.StatusOK, res)
	}
}
