// The protobuf code generators that `make proto` runs, pinned as Go tools.
// Kept apart from the product's go.mod so that the generators never become
// dependencies of a binary. protoc itself is Debian's protobuf-compiler.
module github.com/schedulearn/schedulearn/tools/protoc

go 1.26.0

tool (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.1 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
