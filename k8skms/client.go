package k8skms

import (
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	kmsapi "k8s.io/kms/apis/v2"
)

// Client calls a plugin on its Unix socket with the plugin API's own
// client, as the API server does: for tools (kmsbench) and tests.
type Client struct {
	kmsapi.KeyManagementServiceClient
	conn *grpc.ClientConn
}

// Dial returns a Client of the socket at path ("unix://" in front, as
// an EncryptionConfiguration names it, or not; relative to the working
// directory, or absolute). It connects at the first call, and again
// after a failure.
func Dial(path string) (*Client, error) {
	abs, err := filepath.Abs(strings.TrimPrefix(path, "unix://"))
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &Client{KeyManagementServiceClient: kmsapi.NewKeyManagementServiceClient(conn), conn: conn}, nil
}

// Close closes the client's connection.
func (c *Client) Close() error { return c.conn.Close() }
