//go:build !unix

package abilities

import "errors"

func mkfifo(string) error   { return errors.ErrUnsupported }
func mkdevice(string) error { return errors.ErrUnsupported }
