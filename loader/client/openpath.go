package client

import (
	"context"
	"fmt"

	"github.com/gload/gload/proto/gloadpb"
)

// OpenPath asks the server to open the dataset at path (an absolute
// directory on the server's host, or an s3:// URL) and returns its
// description; its Name is what Open.Dataset takes. The server allows it only
// to its own uid over its unix socket. opened is false when the dataset was
// open already.
func (c *Client) OpenPath(ctx context.Context, path string) (info *gloadpb.DatasetInfo, opened bool, err error) {
	r, err := c.api.OpenPath(ctx, &gloadpb.OpenPathRequest{Path: path})
	if err != nil {
		return nil, false, fmt.Errorf("open path %s on %s: %w", path, c.addr, err)
	}
	return r.GetDataset(), r.GetOpened(), nil
}
