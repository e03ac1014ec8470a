package shared

// StatObject is a tree of statistics: named values and named subtrees.
type StatObject struct {
	Nested     map[string]*StatObject
	Attributes map[string]*StatValue
}

// StatValue is one statistic. Unset fields are "not reported". A number
// may have a denominator (used / total), with Unit applying to both.
type StatValue struct {
	FloatNumeratorVal   *float64
	FloatDenominatorVal *float64
	IntNumeratorVal     *int64
	IntDenominatorVal   *int64
	StringVal           *string
	BoolVal             *bool
	Unit                string
	Desc                string
}
