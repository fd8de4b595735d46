//! The operands of opset < 7 binary ops, whose `broadcast`/`axis` attributes are made explicit.

use super::attrs::Attrs;
use super::lowerer::{normalize_axis, Lowerer, Reason};
use crate::compile::ir::TensorId;
use crate::compile::onnx::Node;

/// Opset ≤ 6 binary ops broadcast only with `broadcast=1`, B's shape matching A's from `axis`
/// (default: A's trailing dims): B viewed with trailing 1s is the numpy equivalent.
pub(super) fn legacy_operand(
    lw: &mut Lowerer,
    node: &Node,
    b: TensorId,
) -> Result<TensorId, Reason> {
    if lw.opset() >= 7 {
        return Ok(b);
    }
    let a = lw.input(node, 0)?;
    let (sa, sb) = (lw.shape(a), lw.shape(b));
    if node.op_type == "PRelu" {
        // Opset 6 PRelu: one slope, or one per channel (axis 1).
        if sb.len() == 1 && sb[0] > 1 && sa.len() >= 2 && sb[0] == sa[1] {
            let mut shape = sb;
            shape.resize(sa.len() - 1, 1);
            return Ok(lw.temp_alias(node, "channel_slope", b, shape));
        }
        return Ok(b);
    }
    if node.int("broadcast", 0)? == 0 {
        if sa != sb {
            return Err(format!("shapes {sa:?} and {sb:?} differ and broadcast=0"));
        }
        return Ok(b);
    }
    let Some(axis) = node.attr("axis").map(|_| node.int("axis", 0)) else {
        return Ok(b);
    };
    let axis = normalize_axis(axis?, sa.len())?;
    if axis + sb.len() > sa.len() {
        return Err(format!("B {sb:?} does not fit A {sa:?} from axis {axis}"));
    }
    let mut shape = sb;
    shape.resize(sa.len() - axis, 1);
    Ok(lw.temp_alias(node, "legacy_broadcast", b, shape))
}
