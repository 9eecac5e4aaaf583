package events

import "time"

var zeroTime time.Time

func nowForTest() time.Time { return time.Now() }
