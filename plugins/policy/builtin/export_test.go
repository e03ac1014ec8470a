package builtin

// DropAtOnce makes counts and fill take every step that can no longer be
// taken off their heaps after each one they drop (on), or as they do by
// default (off), for the tests that compare the two.
func DropAtOnce(on bool) {
	dropAfter, dropShare = 1024, 4
	if on {
		dropAfter, dropShare = 0, 1<<62
	}
}
