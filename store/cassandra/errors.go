package cassandra

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cassfs/cassfs/store"

	"github.com/gocql/gocql"
)

// kinded marks err with the kind the driver's error is of (store.ErrUnavailable,
// store.ErrTimeout), so that store.ErrorKind classifies it without knowing gocql. Its
// message is unchanged.
func kinded(err error) error {
	switch {
	case err == nil:
		return nil
	case isUnavailable(err):
		return &store.KindError{Kind: store.ErrUnavailable, Err: err}
	case isTimeout(err):
		return &store.KindError{Kind: store.ErrTimeout, Err: err}
	}
	return err
}

// isUnavailable reports errors that mean no node could serve a request.
func isUnavailable(err error) bool {
	var ue *gocql.RequestErrUnavailable
	return errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrConnectionClosed) ||
		errors.Is(err, gocql.ErrUnavailable) || errors.As(err, &ue)
}

// isTimeout reports the driver's own timeouts and the server's.
func isTimeout(err error) bool {
	var rt *gocql.RequestErrReadTimeout
	return errors.Is(err, gocql.ErrTimeoutNoResponse) || errors.As(err, &rt)
}

// SetLogger sends the driver's own messages (reconnections, hosts going up and down) to
// log, at level Warn, instead of the standard logger.
func SetLogger(log *slog.Logger) { gocql.Logger = driverLogger{log} }

type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprint(v...)), "from", "gocql")
}
func (l driverLogger) Printf(format string, v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "gocql")
}
func (l driverLogger) Println(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintln(v...)), "from", "gocql")
}
