package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// APIError is an error answered in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}.
type APIError struct {
	Status  int
	Type    string // invalid_request_error, authentication_error, permission_error, not_found_error, rate_limit_error, api_error, ...
	Code    string // invalid_api_key, model_not_found, rate_limit_exceeded, ...
	Param   string
	Message string
	// RetryAfter, when positive, is sent as Retry-After (seconds, rounded
	// up) and retry-after-ms.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("gateway: %d %s: %s", e.Status, e.Type, e.Message)
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *APIError) body() errorBody {
	o := errorObject{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		p := e.Param
		o.Param = &p
	}
	if e.Code != "" {
		c := e.Code
		o.Code = &c
	}
	return errorBody{Error: o}
}

// errOverloaded refuses a request the service would record but could not
// yet grade (Deps.Admit): 503 with Retry-After, nothing recorded.
func errOverloaded(why string) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Code: "overloaded",
		Message: "The service is overloaded (" + why + "). Please retry shortly.", RetryAfter: time.Second}
}

// setRetryHeaders sets Retry-After and retry-after-ms.
func (e *APIError) setRetryHeaders(h http.Header) {
	if e.RetryAfter <= 0 {
		if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
			h.Set("Retry-After", "1")
		}
		return
	}
	secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	h.Set("retry-after-ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
}

func writeAPIError(w http.ResponseWriter, e *APIError) {
	h := w.Header()
	e.setRetryHeaders(h)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.body())
}

func errUnauthorized(msg string) *APIError {
	return &APIError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: msg}
}

func errNotFound(param, msg string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: param, Message: msg}
}

func errModelNotFound(model string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model '%s' does not exist or you do not have access to it.", model)}
}

func errRateLimited(msg string, retry time.Duration) *APIError {
	return &APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: msg, RetryAfter: retry}
}

func errInternal(msg string) *APIError {
	return &APIError{Status: http.StatusInternalServerError, Type: "api_error", Message: msg}
}

// errNotRecorded is the answer when the event store refused an append
// (full disk, I/O error, unavailable): nothing was acknowledged, and the
// request may be retried as it is, so 503 with Retry-After.
func errNotRecorded(msg string) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Code: "store_unavailable", Message: msg, RetryAfter: time.Second}
}

func errTooLarge(limit int64) *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("Request body too large: the limit is %d bytes.", limit)}
}

// engineAPIError maps an engine failure to the client's error.
func engineAPIError(err error) *APIError {
	var ee *EngineError
	if errors.As(err, &ee) {
		t := "api_error"
		switch {
		case ee.Status == http.StatusTooManyRequests:
			t = "rate_limit_error"
		case ee.Status >= 400 && ee.Status < 500:
			t = "invalid_request_error"
		}
		st := ee.Status
		if st < 400 || st > 599 {
			st = http.StatusBadGateway
		}
		e := &APIError{Status: st, Type: t, Message: "engine: " + ee.Message, RetryAfter: ee.RetryAfter}
		if st == http.StatusNotFound {
			e.Code, e.Param = "model_not_found", "model"
		}
		return e
	}
	return &APIError{Status: http.StatusBadGateway, Type: "api_error", Message: "The model engine failed to answer."}
}
